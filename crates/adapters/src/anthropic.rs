//! Anthropic Messages API bodies, and the content blocks Claude Code shares with them.
//!
//! A file holds request bodies (`{"model", "messages": [...]}`), response bodies
//! (`{"type": "message", "content": [...]}`), `{"request": …, "response": …}` exchanges, or the
//! SSE stream of a streamed response (`message_start`, `content_block_start`, `input_json_delta`,
//! …) — one JSON value per line, a JSON array of them, or a single document.
//!
//! `tool_use` blocks (and `server_tool_use` / `mcp_tool_use`) become announces keyed by their
//! `id`; `tool_result` blocks (and the server-side `*_tool_result` blocks) become completions keyed
//! by `tool_use_id`. Requests repeat the whole conversation every time, so blocks are counted by
//! position in the conversation and only blocks past the ones already seen are emitted; a request
//! whose history does not start like the previous one starts a new conversation.

use std::collections::HashMap;

use serde_json::{Map, Value};
use toolcalls_model::Completion;

use crate::common::{excerpt, lines, loose_time, sse, str_field, text_of, Ctx, Env, Sse};

/// A tool call or result found in a content array.
pub(crate) enum Block<'v> {
    Call {
        id: Option<String>,
        name: Option<&'v str>,
        input: Option<&'v Value>,
        /// The block type (`tool_use`, `server_tool_use`, `mcp_tool_use`).
        kind: &'v str,
        index: usize,
    },
    Result {
        id: Option<String>,
        content: Option<&'v Value>,
        is_error: bool,
    },
}

/// The tool calls and results in a message's `content` (a string content has none).
pub(crate) fn blocks(content: &Value) -> Vec<Block<'_>> {
    let Some(items) = content.as_array() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (index, b) in items.iter().enumerate() {
        let Some(kind) = b.get("type").and_then(Value::as_str) else {
            continue;
        };
        if kind == "tool_use" || kind == "server_tool_use" || kind == "mcp_tool_use" {
            out.push(Block::Call {
                id: str_field(b, "id").map(str::to_owned),
                name: str_field(b, "name"),
                input: b.get("input"),
                kind,
                index,
            });
        } else if kind.ends_with("tool_result") {
            let content = b.get("content");
            // Server tools report failure as a content object whose type ends in `_error`.
            let server_error = content
                .and_then(|c| c.get("type"))
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("_error"));
            out.push(Block::Result {
                id: str_field(b, "tool_use_id").map(str::to_owned),
                content,
                is_error: b.get("is_error").and_then(Value::as_bool).unwrap_or(false)
                    || server_error,
            });
        }
    }
    out
}

/// Claude Code writes this text as the result of a tool the user interrupted.
pub(crate) fn is_interrupt(content: Option<&Value>) -> bool {
    content
        .and_then(text_of)
        .is_some_and(|t| t.trim_start().starts_with("[Request interrupted by user"))
}

/// A completion for a `tool_result` block.
pub(crate) fn result_completion(content: Option<&Value>, is_error: bool) -> Completion {
    Completion {
        result: (content.cloned()).map(toolcalls_model::Json::from),
        is_error,
        cancelled: is_interrupt(content),
        ..Completion::default()
    }
}

/// How far into one conversation's history we have emitted.
#[derive(Default)]
struct History {
    first: Option<Value>,
    calls: usize,
    results: usize,
}

/// A `tool_use` block being streamed.
struct Streaming {
    id: Option<String>,
    name: Option<String>,
    json: String,
    line: usize,
}

pub(crate) fn parse(ctx: &mut Ctx<'_>, input: &[u8]) {
    let mut st = State::default();
    // A single pretty-printed document (or array of documents) is read whole.
    let trimmed = input
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .map(|i| &input[i..]);
    let whole = trimmed
        .is_some_and(|t| t.starts_with(b"[") || (t.starts_with(b"{") && !first_line_is_json(t)));
    if whole {
        if let Some(doc) = ctx.json_document(input) {
            match doc {
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        st.value(ctx, 1, i, item);
                    }
                }
                other => st.value(ctx, 1, 0, &other),
            }
        }
        return;
    }
    for (line, bytes) in lines(input) {
        let data = match sse(bytes) {
            Sse::Data(d) => d,
            Sse::Skip => continue,
        };
        if let Some(v) = ctx.json_line(line, data) {
            st.value(ctx, line, line - 1, &v);
        }
    }
}

/// Whether the first line of a `{`-started input is a complete JSON value (JSON lines) rather than
/// the start of a pretty-printed document.
pub(crate) fn first_line_is_json(input: &[u8]) -> bool {
    let first = input.split(|&b| b == b'\n').next().unwrap_or(input);
    serde_json::from_slice::<Value>(first).is_ok()
}

#[derive(Default)]
struct State {
    history: HashMap<String, History>,
    streaming: HashMap<u64, Streaming>,
    session_of_stream: Option<String>,
}

impl State {
    fn value(&mut self, ctx: &mut Ctx<'_>, line: usize, index: usize, v: &Value) {
        let Some(obj) = v.as_object() else {
            ctx.error(
                line,
                "expected a JSON object (a Messages API request, response or stream event)",
            );
            return;
        };
        let time = ctx
            .clock
            .at(index, obj.get("timestamp").and_then(loose_time));
        let session = str_field(v, "session").map(str::to_owned);
        if obj.contains_key("request") || obj.contains_key("response") {
            if let Some(req) = obj.get("request") {
                let req = req.get("body").unwrap_or(req);
                self.request(ctx, line, time, session.clone(), req);
            }
            if let Some(resp) = obj.get("response") {
                let resp = resp.get("body").unwrap_or(resp);
                self.response(ctx, line, time, session, resp);
            }
            return;
        }
        if obj.contains_key("messages") {
            self.request(ctx, line, time, session, v);
        } else if obj.get("type").and_then(Value::as_str) == Some("message") {
            self.response(ctx, line, time, session, v);
        } else if let Some(t) = obj.get("type").and_then(Value::as_str) {
            self.stream_event(ctx, line, time, session, t, v);
        } else {
            ctx.error(
                line,
                "object is neither a request (`messages`), a response (`type: message`) nor a stream event; check --format",
            );
        }
    }

    fn history(&mut self, session: &Option<String>, ctx: &Ctx<'_>) -> &mut History {
        let key = session
            .clone()
            .unwrap_or_else(|| ctx.default_session().to_owned());
        self.history.entry(key).or_default()
    }

    fn request(
        &mut self,
        ctx: &mut Ctx<'_>,
        line: usize,
        time: toolcalls_model::Timestamp,
        session: Option<String>,
        req: &Value,
    ) {
        let Some(messages) = req.get("messages").and_then(Value::as_array) else {
            ctx.error(
                line,
                "request has no `messages` array; expected a Messages API request body",
            );
            return;
        };
        let h = self.history(&session, ctx);
        // A history that starts differently is another conversation; a response seen before any
        // request does not know how its conversation starts yet.
        match &h.first {
            Some(first) if Some(first) != messages.first() => {
                *h = History {
                    first: messages.first().cloned(),
                    ..History::default()
                };
            }
            Some(_) => {}
            None => h.first = messages.first().cloned(),
        }
        let (mut calls, mut results) = (0usize, 0usize);
        let mut todo = Vec::new();
        for (mi, m) in messages.iter().enumerate() {
            let Some(content) = m.get("content") else {
                continue;
            };
            for b in blocks(content) {
                match b {
                    Block::Call { .. } => {
                        calls += 1;
                        if calls > h.calls {
                            todo.push((mi, b));
                        }
                    }
                    Block::Result { .. } => {
                        results += 1;
                        if results > h.results {
                            todo.push((mi, b));
                        }
                    }
                }
            }
        }
        h.calls = h.calls.max(calls);
        h.results = h.results.max(results);
        for (mi, b) in todo {
            emit_block(ctx, line, &format!("messages[{mi}]"), time, &session, b);
        }
    }

    fn response(
        &mut self,
        ctx: &mut Ctx<'_>,
        line: usize,
        time: toolcalls_model::Timestamp,
        session: Option<String>,
        resp: &Value,
    ) {
        let Some(content) = resp.get("content") else {
            ctx.error(
                line,
                "response has no `content`; expected a Messages API response body",
            );
            return;
        };
        let found = blocks(content);
        let h = self.history(&session, ctx);
        h.calls += found
            .iter()
            .filter(|b| matches!(b, Block::Call { .. }))
            .count();
        for b in found {
            emit_block(ctx, line, "content", time, &session, b);
        }
    }

    fn stream_event(
        &mut self,
        ctx: &mut Ctx<'_>,
        line: usize,
        time: toolcalls_model::Timestamp,
        session: Option<String>,
        kind: &str,
        v: &Value,
    ) {
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind {
            "message_start" => {
                self.streaming.clear();
                self.session_of_stream = session;
                ctx.skip();
            }
            "content_block_start" => {
                let b = v.get("content_block").unwrap_or(&Value::Null);
                let t = b.get("type").and_then(Value::as_str).unwrap_or("");
                if t.ends_with("tool_use") {
                    // `input` is `{}` here; the real arguments follow as `input_json_delta`s.
                    self.streaming.insert(
                        index,
                        Streaming {
                            id: str_field(b, "id").map(str::to_owned),
                            name: str_field(b, "name").map(str::to_owned),
                            json: String::new(),
                            line,
                        },
                    );
                } else if t.ends_with("tool_result") {
                    let session = self.session_of_stream.clone().or(session);
                    let one = Value::Array(vec![b.clone()]);
                    for blk in blocks(&one) {
                        emit_block(ctx, line, "content_block", time, &session, blk);
                    }
                } else {
                    ctx.skip();
                }
            }
            "content_block_delta" => {
                let d = v.get("delta").unwrap_or(&Value::Null);
                if d.get("type").and_then(Value::as_str) == Some("input_json_delta") {
                    if let Some(s) = self.streaming.get_mut(&index) {
                        s.json
                            .push_str(d.get("partial_json").and_then(Value::as_str).unwrap_or(""));
                        return;
                    }
                }
                ctx.skip();
            }
            "content_block_stop" => {
                let Some(s) = self.streaming.remove(&index) else {
                    ctx.skip();
                    return;
                };
                let session = self.session_of_stream.clone().or(session);
                let args = if s.json.trim().is_empty() {
                    Value::Object(Map::new())
                } else {
                    match serde_json::from_str(&s.json) {
                        Ok(v) => v,
                        Err(e) => {
                            ctx.error(
                                s.line,
                                format!(
                                    "streamed tool input is not JSON ({e}): `{}`; the stream was cut short",
                                    excerpt(&s.json)
                                ),
                            );
                            Value::String(s.json)
                        }
                    }
                };
                let Some(name) = s.name else {
                    ctx.error(
                        s.line,
                        "streamed tool_use block has no `name`; the stream is incomplete",
                    );
                    return;
                };
                let h = self.history(&session, ctx);
                h.calls += 1;
                let env = Env {
                    session,
                    call_id: s.id,
                    time,
                    ..Env::default()
                };
                ctx.announce(env, &name, Some(args));
            }
            _ => ctx.skip(),
        }
    }
}

fn emit_block(
    ctx: &mut Ctx<'_>,
    line: usize,
    at: &str,
    time: toolcalls_model::Timestamp,
    session: &Option<String>,
    b: Block<'_>,
) {
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
                    format!("{at}.content[{index}]"),
                    format!("`{kind}` block has no `name`; skipped"),
                );
                return;
            };
            let env = Env {
                session: session.clone(),
                call_id: id,
                time,
                ..Env::default()
            };
            ctx.announce(env, name, input.cloned());
        }
        Block::Result {
            id,
            content,
            is_error,
            ..
        } => {
            let env = Env {
                session: session.clone(),
                call_id: id,
                time,
                ..Env::default()
            };
            ctx.complete(env, result_completion(content, is_error));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{parse as parse_file, Format, Options};
    use toolcalls_model::EventBody;

    fn run(input: &str) -> crate::Parsed {
        parse_file(
            Format::Anthropic,
            "conv.jsonl",
            input.as_bytes(),
            &Options::default(),
        )
    }

    #[test]
    fn requests_repeat_history_but_each_call_is_emitted_once() {
        let req1 = r#"{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"weather in Paris and Rome?"}]}"#;
        let resp1 = r#"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_a","name":"get_weather","input":{"city":"Paris"}},{"type":"tool_use","id":"toolu_b","name":"get_weather","input":{"city":"Rome"}}],"stop_reason":"tool_use"}"#;
        let req2 = r#"{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"weather in Paris and Rome?"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_a","name":"get_weather","input":{"city":"Paris"}},{"type":"tool_use","id":"toolu_b","name":"get_weather","input":{"city":"Rome"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_b","content":"18C"},{"type":"tool_result","tool_use_id":"toolu_a","content":"city not found","is_error":true}]}]}"#;
        let p = run(&[req1, resp1, req2].join("\n"));
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        let kinds: Vec<_> = p
            .events
            .iter()
            .map(|e| (e.kind().as_str(), e.call_id.as_ref().unwrap().as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("announce", "toolu_a"),
                ("announce", "toolu_b"),
                ("completion", "toolu_b"),
                ("completion", "toolu_a")
            ]
        );
        let EventBody::Completion(c) = &p.events[3].body else {
            panic!()
        };
        assert!(c.is_error);
        assert!(p.events.iter().all(|e| e.session.as_str() == "conv"));
        // No times in API bodies: line index in ms from the epoch.
        assert_eq!(p.events[0].time.millis(), 1);
        assert_eq!(p.events[2].time.millis(), 2);
    }

    #[test]
    fn request_only_logs_emit_calls_from_history() {
        let req = r#"{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"ls","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"a b"}]}]}]}"#;
        let p = run(&format!("{req}\n{req}"));
        assert_eq!(p.events.len(), 2, "the repeated request adds nothing");
    }

    #[test]
    fn a_request_with_another_history_starts_a_new_conversation() {
        let a = r#"{"messages":[{"role":"user","content":"one"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"ls","input":{}}]}]}"#;
        let b = r#"{"messages":[{"role":"user","content":"two"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"ls","input":{}}]}]}"#;
        let p = run(&format!("{a}\n{b}\n{a}"));
        let ids: Vec<_> = p
            .events
            .iter()
            .map(|e| e.call_id.as_ref().unwrap().as_str())
            .collect();
        assert_eq!(
            ids,
            ["toolu_1", "toolu_2", "toolu_1"],
            "each switch of history restarts the count"
        );
    }

    #[test]
    fn streamed_tool_use_is_assembled() {
        let s = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_9","type":"message","role":"assistant","content":[]}}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_s","name":"search","input":{}}}

data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"q\": \"ru"}}
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"st\"}"}}
data: {"type":"content_block_stop","index":1}
data: {"type":"message_stop"}
"#;
        let p = run(s);
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert_eq!(p.events.len(), 1);
        let EventBody::Announce(a) = &p.events[0].body else {
            panic!()
        };
        assert_eq!(a.tool, "search");
        assert_eq!(
            a.args.as_ref().map(|j| j.to_value()),
            Some(serde_json::json!({"q": "rust"}))
        );
        assert!(a.checksum.is_some());
    }

    #[test]
    fn pretty_printed_exchange_and_bad_lines() {
        let doc = r#"{
  "request": {"messages": [{"role": "user", "content": "hi"}]},
  "response": {"type": "message", "content": [{"type": "tool_use", "id": "toolu_x", "name": "now", "input": {}}]}
}"#;
        let p = run(doc);
        assert_eq!(p.events.len(), 1);
        let p = run("{\"type\":\"message\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t\"}]}\nnot json\n[1]");
        assert_eq!(p.errors.len(), 3, "{:?}", p.errors);
        assert!(p.errors[0].message.contains("no `name`"));
        assert_eq!(p.errors[1].line, 2);
        assert!(p.errors[2].message.contains("expected a JSON object"));
    }
}

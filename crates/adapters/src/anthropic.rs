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

use crate::bodies::{each_value, Conversations, Origin};
use crate::common::{excerpt, loose_time_field, text_field, text_of, Ctx};

/// A tool call or result found in a content array.
pub(crate) enum Block<'v> {
    Call(CallBlock<'v>),
    Result(ResultBlock<'v>),
}

/// A `tool_use` (or `server_tool_use`, `mcp_tool_use`) block.
pub(crate) struct CallBlock<'v> {
    pub id: Option<String>,
    pub name: Option<&'v str>,
    pub input: Option<&'v Value>,
    /// The block type (`tool_use`, `server_tool_use`, `mcp_tool_use`).
    pub kind: &'v str,
    /// The block's position in its content array.
    pub index: usize,
    /// A field of the wrong type (`"id": 7`): the block cannot be read as the call it is.
    pub problem: Option<String>,
}

impl<'v> CallBlock<'v> {
    /// The tool's name. A block without one, or with a field of the wrong type, is reported at
    /// `{at}.content[index]` and skipped.
    pub fn name_or_report(&self, ctx: &mut Ctx, line: usize, at: &str) -> Option<&'v str> {
        let problem = match (&self.problem, self.name) {
            (None, Some(name)) => return Some(name),
            (Some(problem), _) => problem.clone(),
            (None, None) => format!("`{}` block has no `name`", self.kind),
        };
        report(ctx, line, at, self.index, &problem);
        None
    }
}

/// A `tool_result` (or server-side `*_tool_result`) block.
pub(crate) struct ResultBlock<'v> {
    /// The `tool_use_id` of its call.
    pub id: Option<String>,
    pub content: Option<&'v Value>,
    pub is_error: bool,
    /// As [`CallBlock::index`].
    pub index: usize,
    /// As [`CallBlock::problem`].
    pub problem: Option<String>,
}

impl ResultBlock<'_> {
    /// Whether the block can be read: one with a field of the wrong type is reported at
    /// `{at}.content[index]` and skipped.
    pub fn readable_or_report(&self, ctx: &mut Ctx, line: usize, at: &str) -> bool {
        if let Some(problem) = &self.problem {
            report(ctx, line, at, self.index, problem);
        }
        self.problem.is_none()
    }

    /// The completion the block makes (without its call id); a result whose text says the user
    /// interrupted the tool is a cancelled call.
    pub fn completion(&self) -> Completion {
        Completion {
            result: (self.content.cloned()).map(toolcalls_model::Json::from),
            is_error: self.is_error,
            cancelled: is_interrupt(self.content),
            ..Completion::default()
        }
    }
}

/// Reports a content block that cannot be read, and that it was left out.
fn report(ctx: &mut Ctx, line: usize, at: &str, index: usize, problem: &str) {
    ctx.error_at(
        line,
        format!("{at}.content[{index}]"),
        format!("{problem}; skipped"),
    );
}

/// The value of a field read with [`text_field`], keeping the first problem met in a block.
fn kept<T>(read: Result<Option<T>, String>, problem: &mut Option<String>) -> Option<T> {
    read.unwrap_or_else(|e| {
        problem.get_or_insert(e);
        None
    })
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
        let mut problem = None;
        if kind == "tool_use" || kind == "server_tool_use" || kind == "mcp_tool_use" {
            out.push(Block::Call(CallBlock {
                id: kept(text_field(b, "id"), &mut problem).map(str::to_owned),
                name: kept(text_field(b, "name"), &mut problem),
                input: b.get("input"),
                kind,
                index,
                problem,
            }));
        } else if kind.ends_with("tool_result") {
            let content = b.get("content");
            // Server tools report failure as a content object whose type ends in `_error`.
            let server_error = content
                .and_then(|c| c.get("type"))
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("_error"));
            out.push(Block::Result(ResultBlock {
                id: kept(text_field(b, "tool_use_id"), &mut problem).map(str::to_owned),
                content,
                is_error: b.get("is_error").and_then(Value::as_bool).unwrap_or(false)
                    || server_error,
                index,
                problem,
            }));
        }
    }
    out
}

/// Claude Code writes this text as the result of a tool the user interrupted.
fn is_interrupt(content: Option<&Value>) -> bool {
    content
        .and_then(text_of)
        .is_some_and(|t| t.trim_start().starts_with("[Request interrupted by user"))
}

/// A `tool_use` block being streamed.
struct Streaming {
    id: Option<String>,
    name: Option<String>,
    json: String,
    line: usize,
}

pub(crate) fn parse(ctx: &mut Ctx, input: &[u8]) {
    let mut state = State::default();
    each_value(ctx, input, |ctx, line, index, v| {
        state.value(ctx, line, index, v)
    });
}

#[derive(Default)]
struct State {
    history: Conversations,
    streaming: HashMap<u64, Streaming>,
    session_of_stream: Option<String>,
}

impl State {
    fn value(&mut self, ctx: &mut Ctx, line: usize, index: usize, v: &Value) {
        let Some(obj) = v.as_object() else {
            ctx.error(
                line,
                "expected a JSON object (a Messages API request, response or stream event)",
            );
            return;
        };
        let (time, session) = match (loose_time_field(v, "timestamp"), text_field(v, "session")) {
            (Ok(time), Ok(session)) => (time, session),
            (Err(problem), _) | (_, Err(problem)) => {
                ctx.error(line, problem);
                return;
            }
        };
        let origin = Origin {
            line,
            time: ctx.clock.at(index, time),
            session: session.map(str::to_owned),
        };
        if obj.contains_key("request") || obj.contains_key("response") {
            if let Some(req) = obj.get("request") {
                self.request(ctx, &origin, req.get("body").unwrap_or(req));
            }
            if let Some(resp) = obj.get("response") {
                self.response(ctx, &origin, resp.get("body").unwrap_or(resp));
            }
            return;
        }
        if obj.contains_key("messages") {
            self.request(ctx, &origin, v);
        } else if obj.get("type").and_then(Value::as_str) == Some("message") {
            self.response(ctx, &origin, v);
        } else if let Some(t) = obj.get("type").and_then(Value::as_str) {
            self.stream_event(ctx, origin, t, v);
        } else {
            ctx.error(
                line,
                "object is neither a request (`messages`), a response (`type: message`) nor a stream event; check --format",
            );
        }
    }

    fn request(&mut self, ctx: &mut Ctx, origin: &Origin, req: &Value) {
        let Some(messages) = req.get("messages").and_then(Value::as_array) else {
            ctx.error(
                origin.line,
                "request has no `messages` array; expected a Messages API request body",
            );
            return;
        };
        let mut found = Vec::new();
        for (mi, m) in messages.iter().enumerate() {
            if let Some(content) = m.get("content") {
                found.extend(blocks(content).into_iter().map(|b| (mi, b)));
            }
        }
        let new =
            self.history
                .of(ctx, &origin.session)
                .unseen(messages.first(), found, |(_, b)| {
                    matches!(b, Block::Call(_))
                });
        for (mi, b) in new {
            emit_block(ctx, origin, &format!("messages[{mi}]"), b);
        }
    }

    fn response(&mut self, ctx: &mut Ctx, origin: &Origin, resp: &Value) {
        let Some(content) = resp.get("content") else {
            ctx.error(
                origin.line,
                "response has no `content`; expected a Messages API response body",
            );
            return;
        };
        let found = blocks(content);
        self.history.of(ctx, &origin.session).calls +=
            found.iter().filter(|b| matches!(b, Block::Call(_))).count();
        for b in found {
            emit_block(ctx, origin, "content", b);
        }
    }

    fn stream_event(&mut self, ctx: &mut Ctx, origin: Origin, kind: &str, v: &Value) {
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind {
            "message_start" => {
                self.streaming.clear();
                self.session_of_stream = origin.session;
                ctx.skip();
            }
            "content_block_start" => {
                let b = v.get("content_block").unwrap_or(&Value::Null);
                let t = b.get("type").and_then(Value::as_str).unwrap_or("");
                if t.ends_with("tool_use") {
                    let (id, name) = match (text_field(b, "id"), text_field(b, "name")) {
                        (Ok(id), Ok(name)) => (id, name),
                        (Err(problem), _) | (_, Err(problem)) => {
                            ctx.error_at(
                                origin.line,
                                "content_block",
                                format!("{problem}; skipped"),
                            );
                            return;
                        }
                    };
                    // `input` is `{}` here; the real arguments follow as `input_json_delta`s.
                    self.streaming.insert(
                        index,
                        Streaming {
                            id: id.map(str::to_owned),
                            name: name.map(str::to_owned),
                            json: String::new(),
                            line: origin.line,
                        },
                    );
                } else if t.ends_with("tool_result") {
                    let origin = Origin {
                        session: self.session_of_stream.clone().or(origin.session),
                        ..origin
                    };
                    let one = Value::Array(vec![b.clone()]);
                    for blk in blocks(&one) {
                        emit_block(ctx, &origin, "content_block", blk);
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
                let origin = Origin {
                    session: self.session_of_stream.clone().or(origin.session),
                    ..origin
                };
                let args = if s.json.trim().is_empty() {
                    Value::Object(Map::new())
                } else {
                    match crate::value::parse(s.json.as_bytes()) {
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
                self.history.of(ctx, &origin.session).calls += 1;
                ctx.announce(origin.envelope(s.id), &name, Some(args));
            }
            _ => ctx.skip(),
        }
    }
}

/// Emits the call or result of a block found at `at` (a JSON path) of the value read at `origin`.
fn emit_block(ctx: &mut Ctx, origin: &Origin, at: &str, b: Block<'_>) {
    match b {
        Block::Call(call) => {
            let Some(name) = call.name_or_report(ctx, origin.line, at) else {
                return;
            };
            ctx.announce(origin.envelope(call.id), name, call.input.cloned());
        }
        Block::Result(result) => {
            if result.readable_or_report(ctx, origin.line, at) {
                ctx.complete(origin.envelope(result.id.clone()), result.completion());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::parse_str;
    use crate::Format;
    use toolcalls_model::EventBody;

    fn run(input: &str) -> crate::Parsed {
        parse_str(Format::Anthropic, "conv.jsonl", input)
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

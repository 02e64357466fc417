//! OpenAI Responses API.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};
use toolcalls_model::{Completion, Timestamp};

use super::exchange::for_each_body;
use crate::bodies::each_value;
use crate::common::{
    excerpt, hints_as, seconds_field, str_field, text_field, ArgsWire, Ctx, Envelope,
};

/// A call item being streamed, by item id.
struct Item {
    call_id: Option<String>,
    name: Option<String>,
    args: String,
}

/// OpenAI Responses API: the SSE event stream (`response.output_item.added` →
/// `response.function_call_arguments.delta`… → `response.output_item.done`; recorded `*.chunks.txt`
/// files without the `data:` prefix too), response objects (`object: response`), requests
/// (`input` items) and `{"request", "response"}` exchanges.
///
/// - Calls are linked by `call_id`, never by the item id (`fc_…`): `function_call`,
///   `custom_tool_call`, `computer_call` and `local_shell_call` items are announces; the matching
///   `*_output` items — which only come back in the next request's `input` — are completions.
///   Items repeated in later requests are emitted once (per session and `call_id`).
/// - `mcp_call` items ran on OpenAI's side: an announce and a completion, keyed by the item id.
/// - Session: the response's `conversation.id` when it has one, else `--session` or the file name.
/// - Time: `created_at` of the response, then one millisecond per line after it. Outputs carry no
///   error flag.
pub(crate) fn responses(ctx: &mut Ctx, input: &[u8]) {
    let mut state = Responses::default();
    each_value(ctx, input, |ctx, line, index, v| {
        state.value(ctx, line, index, v)
    });
}

#[derive(Default)]
struct Responses {
    session: Option<String>,
    announced: HashSet<(String, String)>,
    completed: HashSet<(String, String)>,
    items: HashMap<String, Item>,
}

impl Responses {
    fn value(&mut self, ctx: &mut Ctx, line: usize, index: usize, v: &Value) {
        if !v.is_object() {
            ctx.error(
                line,
                "expected a JSON object (a Responses API event, response or request)",
            );
            return;
        }
        if v.get("request").is_some() || (v.get("response").is_some() && v.get("type").is_none()) {
            for_each_body(v, |body| self.value(ctx, line, index, body));
            return;
        }
        let kind = str_field(v, "type").unwrap_or("");
        if kind.starts_with("response.") {
            self.event(ctx, line, index, kind, v);
        } else if str_field(v, "object") == Some("response")
            || v.get("output").is_some_and(Value::is_array)
        {
            let created = match (seconds_field(v, "created_at"), self.set_session(v)) {
                (Ok(created), Ok(())) => created,
                (Err(problem), _) | (_, Err(problem)) => {
                    ctx.error(line, problem);
                    return;
                }
            };
            let time = ctx.clock.at(index, created);
            self.output(ctx, line, time, v);
        } else if v.get("input").is_some() {
            let time = ctx.clock.at(index, None);
            match v.get("input") {
                Some(Value::Array(items)) => {
                    let mut any = false;
                    for (i, item) in items.iter().enumerate() {
                        any |= self.item(ctx, line, &format!("input[{i}]"), time, item);
                    }
                    if !any {
                        ctx.skip();
                    }
                }
                _ => ctx.skip(),
            }
        } else {
            ctx.error(
                line,
                format!(
                    "object is not a Responses API event (`type: response.*`), response or request (`input`): `{}`; check --format",
                    excerpt(&v.to_string())
                ),
            );
        }
    }

    /// Takes the session from a response's `conversation` (its id, or an object with it).
    fn set_session(&mut self, response: &Value) -> Result<(), String> {
        let conv = match response.get("conversation") {
            Some(Value::Object(_)) => text_field(&response["conversation"], "id")?,
            Some(_) => text_field(response, "conversation")?,
            None => None,
        };
        if let Some(c) = conv {
            self.session = Some(c.to_owned());
        }
        Ok(())
    }

    fn event(&mut self, ctx: &mut Ctx, line: usize, index: usize, kind: &str, v: &Value) {
        let response = v.get("response");
        let created = match (kind, response) {
            ("response.created", Some(r)) => match seconds_field(r, "created_at") {
                Ok(created) => created,
                Err(problem) => {
                    ctx.error(line, problem);
                    return;
                }
            },
            _ => None,
        };
        let time = ctx.clock.at(index, created);
        match kind {
            "response.created" => {
                if let Some(r) = response {
                    if let Err(problem) = self.set_session(r) {
                        ctx.error(line, problem);
                        return;
                    }
                }
                ctx.skip();
            }
            "response.output_item.added" => {
                let item = v.get("item").unwrap_or(&Value::Null);
                if let Some("function_call" | "custom_tool_call") = str_field(item, "type") {
                    match names(item) {
                        Ok((Some(id), call_id, name)) => {
                            let item = Item {
                                call_id: call_id.map(str::to_owned),
                                name: name.map(str::to_owned),
                                args: String::new(),
                            };
                            self.items.insert(id.to_owned(), item);
                        }
                        Ok((None, ..)) => {}
                        Err(problem) => {
                            ctx.error_at(line, "item", format!("{problem}; skipped"));
                            return;
                        }
                    }
                }
                ctx.skip();
            }
            "response.function_call_arguments.delta" | "response.custom_tool_call_input.delta" => {
                if let (Some(id), Some(d)) = (
                    str_field(v, "item_id"),
                    v.get("delta").and_then(Value::as_str),
                ) {
                    if let Some(item) = self.items.get_mut(id) {
                        item.args.push_str(d);
                    }
                }
                ctx.skip();
            }
            "response.output_item.done" => {
                let Some(item) = v.get("item") else {
                    ctx.error(line, "response.output_item.done has no `item`");
                    return;
                };
                if let Some(id) = str_field(item, "id") {
                    self.items.remove(id);
                }
                if !self.item(ctx, line, "item", time, item) {
                    ctx.skip();
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                // Calls whose `output_item.done` was lost: take them from the final response.
                if let Some(r) = response {
                    self.output(ctx, line, time, r);
                }
                for (_, item) in std::mem::take(&mut self.items) {
                    let Some(name) = item.name else { continue };
                    let call = serde_json::json!({"type": "function_call", "call_id": item.call_id, "name": name, "arguments": item.args});
                    self.item(ctx, line, "response", time, &call);
                }
                ctx.skip();
            }
            _ => ctx.skip(),
        }
    }

    fn output(&mut self, ctx: &mut Ctx, line: usize, time: Timestamp, response: &Value) {
        let Some(items) = response.get("output").and_then(Value::as_array) else {
            return;
        };
        for (i, item) in items.iter().enumerate() {
            self.item(ctx, line, &format!("output[{i}]"), time, item);
        }
    }

    /// Emits one item; returns whether it was a call or a result (even if already emitted).
    fn item(
        &mut self,
        ctx: &mut Ctx,
        line: usize,
        at: &str,
        time: Timestamp,
        item: &Value,
    ) -> bool {
        let Some(kind) = str_field(item, "type") else {
            return false;
        };
        let scope = ctx.session_or_default(&self.session);
        let env = Envelope {
            session: self.session.clone(),
            time,
            ..Envelope::default()
        };
        let (item_id, call_id, name) = match names(item) {
            Ok(fields) => fields,
            Err(problem) if is_call_item(kind) => {
                ctx.error_at(line, at, format!("{problem}; skipped"));
                return true;
            }
            Err(_) => return false,
        };
        let call_id = call_id.map(str::to_owned);
        match kind {
            "function_call" | "custom_tool_call" | "computer_call" | "local_shell_call" => {
                // `function_call` arguments are JSON text; the other items carry the value.
                let (name, args, wire) = match kind {
                    "function_call" => (name, item.get("arguments"), ArgsWire::Encoded),
                    "custom_tool_call" => (name, item.get("input"), ArgsWire::Value),
                    "computer_call" => (Some("computer"), item.get("action"), ArgsWire::Value),
                    _ => (Some("local_shell"), item.get("action"), ArgsWire::Value),
                };
                let Some(name) = name else {
                    ctx.error_at(line, at, format!("{kind} item has no `name`; skipped"));
                    return true;
                };
                if let Some(id) = &call_id {
                    if !self.announced.insert((scope, id.clone())) {
                        return true;
                    }
                }
                ctx.announce_as(Envelope { call_id, ..env }, name, args.cloned(), wire);
                true
            }
            "function_call_output"
            | "custom_tool_call_output"
            | "computer_call_output"
            | "local_shell_call_output" => {
                let Some(id) = call_id else {
                    ctx.error_at(
                        line,
                        at,
                        format!("{kind} item has no `call_id`; it cannot name its call"),
                    );
                    return true;
                };
                if !self.completed.insert((scope, id.clone())) {
                    return true;
                }
                let c = Completion {
                    result: (item.get("output").cloned()).map(toolcalls_model::Json::from),
                    ..Completion::default()
                };
                ctx.complete(
                    Envelope {
                        call_id: Some(id),
                        ..env
                    },
                    c,
                );
                true
            }
            "mcp_call" => {
                let (Some(id), Some(name)) = (item_id, name) else {
                    ctx.error_at(line, at, "mcp_call item needs `id` and `name`; skipped");
                    return true;
                };
                if !self.announced.insert((scope, id.to_owned())) {
                    return true;
                }
                let mut attributes = Map::new();
                if let Some(label) = item.get("server_label") {
                    attributes.insert("mcpServer".into(), label.clone());
                }
                let env = Envelope {
                    call_id: Some(id.to_owned()),
                    attributes: Some(attributes),
                    ..env
                };
                // An `mcp_call`'s arguments are JSON text, like a function call's.
                let args = item.get("arguments").cloned();
                ctx.announce_as(env.clone(), name, args.clone(), ArgsWire::Encoded);
                let error = item.get("error").filter(|e| !e.is_null());
                let c = Completion {
                    result: (error.or_else(|| item.get("output")).cloned())
                        .map(toolcalls_model::Json::from),
                    is_error: error.is_some(),
                    ..hints_as(Some(name), args, ArgsWire::Encoded)
                };
                ctx.complete(env, c);
                true
            }
            _ => false,
        }
    }
}

/// What an item is known by: its `id`, its `call_id` and its tool's `name`.
type Names<'v> = (Option<&'v str>, Option<&'v str>, Option<&'v str>);

/// An item's [`Names`], or the one of them that holds a value of the wrong type.
fn names(item: &Value) -> Result<Names<'_>, String> {
    Ok((
        text_field(item, "id")?,
        text_field(item, "call_id")?,
        text_field(item, "name")?,
    ))
}

/// Whether an item of this `type` is a call or a result (what [`Responses::item`] emits).
fn is_call_item(kind: &str) -> bool {
    matches!(
        kind,
        "function_call"
            | "custom_tool_call"
            | "computer_call"
            | "local_shell_call"
            | "function_call_output"
            | "custom_tool_call_output"
            | "computer_call_output"
            | "local_shell_call_output"
            | "mcp_call"
    )
}

#[cfg(test)]
mod tests {
    use crate::test_support::{kinds_and_ids as ids, parse_str};
    use crate::Format;
    use toolcalls_model::EventKind;

    #[test]
    fn responses_exchange_with_a_streamed_response() {
        let x = r#"{"request":{"input":[{"type":"function_call_output","call_id":"call_0a","output":"ok"}]},"response":[{"type":"response.created","response":{"id":"resp_2","created_at":1767398400,"output":[]}},{"type":"response.output_item.done","item":{"id":"fc_9","type":"function_call","call_id":"call_0b","name":"next","arguments":"{}"}}]}"#;
        let p = parse_str(Format::OpenaiResponses, "x.jsonl", x);
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert_eq!(
            ids(&p),
            [
                (EventKind::Completion, Some("call_0a")),
                (EventKind::Announce, Some("call_0b"))
            ]
        );
    }

    #[test]
    fn responses_mcp_calls_ran_server_side() {
        let r = r#"{"id":"resp_9","object":"response","created_at":1767398400,"output":[{"id":"mcp_1","type":"mcp_call","server_label":"deepwiki","name":"ask_question","arguments":"{\"q\":\"x\"}","output":"answer","error":null}]}"#;
        let p = parse_str(Format::OpenaiResponses, "r.json", r);
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert_eq!(
            ids(&p),
            [
                (EventKind::Announce, Some("mcp_1")),
                (EventKind::Completion, Some("mcp_1"))
            ]
        );
        assert_eq!(
            p.events[0].attributes.as_ref().unwrap()["mcpServer"],
            "deepwiki"
        );
    }

    #[test]
    fn responses_link_by_call_id_across_stream_and_next_request() {
        let s = [
            r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1765552659,"status":"in_progress","output":[]}}"#,
            r#"{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_X","name":"calculator"}}"#,
            r#"{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_1","output_index":0,"delta":"{\"a\":1}"}"#,
            r#"{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"a\":1}","call_id":"call_X","name":"calculator"}}"#,
            r#"{"type":"response.completed","sequence_number":4,"response":{"id":"resp_1","object":"response","created_at":1765552659,"status":"completed","output":[{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"a\":1}","call_id":"call_X","name":"calculator"}]}}"#,
            r#"{"model":"gpt-5","input":[{"role":"user","content":"1+?"},{"id":"fc_1","type":"function_call","arguments":"{\"a\":1}","call_id":"call_X","name":"calculator"},{"type":"function_call_output","call_id":"call_X","output":"1"}]}"#,
            r#"{"model":"gpt-5","input":[{"type":"function_call_output","output":"2"}]}"#,
        ];
        let p = parse_str(Format::OpenaiResponses, "r.chunks.txt", &s.join("\n"));
        assert_eq!(p.errors.len(), 1, "{:?}", p.errors);
        assert_eq!(p.errors[0].line, 7);
        assert_eq!(p.errors[0].at.as_deref(), Some("input[0]"));
        assert_eq!(
            ids(&p),
            [
                (EventKind::Announce, Some("call_X")),
                (EventKind::Completion, Some("call_X"))
            ]
        );
        assert_eq!(
            p.events[0].time.millis(),
            1_765_552_659_003,
            "created_at + lines since"
        );
        assert_eq!(p.events[0].session.as_str(), "r");
    }
}

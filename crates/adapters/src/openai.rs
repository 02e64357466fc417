//! OpenAI: Chat Completions and the Responses API.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};
use toolcalls_model::{Completion, Timestamp};

use crate::anthropic::first_line_is_json;
use crate::common::{excerpt, hints, lines, seconds, sse, str_field, Ctx, Env, IdScope, Sse};

/// Calls one pass over a file: a whole document (or array), or one JSON value per line with SSE
/// `data:` prefixes allowed. `f(ctx, line, index, value)`.
fn each_value(
    ctx: &mut Ctx<'_>,
    input: &[u8],
    mut f: impl FnMut(&mut Ctx<'_>, usize, usize, &Value),
) {
    let start = input
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .map(|i| &input[i..]);
    let whole = start
        .is_some_and(|t| t.starts_with(b"[") || (t.starts_with(b"{") && !first_line_is_json(t)));
    if whole {
        if let Some(doc) = ctx.json_document(input) {
            match doc {
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        f(ctx, 1, i, item);
                    }
                }
                other => f(ctx, 1, 0, &other),
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
            f(ctx, line, line - 1, &v);
        }
    }
}

/// How far into one conversation's `messages` we have emitted.
#[derive(Default)]
struct History {
    first: Option<Value>,
    calls: usize,
    results: usize,
}

/// A streamed tool call being assembled.
struct Partial {
    id: Option<String>,
    name: Option<String>,
    args: String,
    line: usize,
    time: Timestamp,
    session: Option<String>,
}

/// OpenAI Chat Completions: requests (`messages`), whole responses (`chat.completion`), streamed
/// chunks (`chat.completion.chunk`, with or without SSE `data:` prefixes), and
/// `{"request", "response"}` exchanges.
///
/// - Assistant `tool_calls` (and the legacy `function_call`) are announces; `role: tool` messages
///   (`tool_call_id`) and legacy `role: function` messages are completions. Results only ever
///   appear in the next request, so a file of responses alone has announces only.
/// - Streamed calls are assembled per `(response id, tool_calls[].index)`: the id and name come only
///   in the first chunk of an index, the arguments in pieces. A call is emitted when its choice
///   finishes, another response starts, or the input ends, at the time of its first chunk.
/// - Blank ids count as absent. Ids a provider repeats for different calls (`call_0` in every
///   response) are renamed per session (see the crate docs), and a result names the oldest call
///   with its id that has no result yet.
/// - Requests repeat the conversation; messages are counted by position and only new calls and
///   results are emitted. Only the first choice (`index` 0) is read: other choices are alternatives
///   the client did not act on.
/// - Time: `created` (seconds) of responses and chunks; requests carry none (the clock rule).
///   Tool messages carry no error flag, so results are never errors.
pub(crate) fn chat(ctx: &mut Ctx<'_>, input: &[u8]) {
    let mut st = Chat::default();
    each_value(ctx, input, |ctx, line, index, v| {
        st.value(ctx, line, index, v)
    });
    st.flush(ctx, |_| true);
}

#[derive(Default)]
struct Chat {
    history: HashMap<String, History>,
    ids: IdScope,
    /// Streamed calls by (response id, tool index), in order of first appearance.
    partials: Vec<((String, u64), Partial)>,
}

impl Chat {
    fn value(&mut self, ctx: &mut Ctx<'_>, line: usize, index: usize, v: &Value) {
        if !v.is_object() {
            ctx.error(
                line,
                "expected a JSON object (a Chat Completions request, response or chunk)",
            );
            return;
        }
        let session = str_field(v, "session").map(str::to_owned);
        if v.get("request").is_some() || v.get("response").is_some() {
            if let Some(req) = v.get("request") {
                self.value(ctx, line, index, req.get("body").unwrap_or(req));
            }
            match v.get("response").map(|r| r.get("body").unwrap_or(r)) {
                Some(Value::Array(chunks)) => {
                    for c in chunks {
                        self.value(ctx, line, index, c);
                    }
                }
                Some(r) => self.value(ctx, line, index, r),
                None => {}
            }
            return;
        }
        let time = ctx.clock.at(index, v.get("created").and_then(seconds));
        let object = str_field(v, "object").unwrap_or("");
        let is_chunk = object == "chat.completion.chunk"
            || v.get("choices")
                .and_then(Value::as_array)
                .is_some_and(|c| c.iter().any(|c| c.get("delta").is_some()));
        if is_chunk {
            self.chunk(ctx, line, time, session, v);
        } else if v.get("choices").is_some() {
            self.flush(ctx, |_| true);
            self.response(ctx, line, time, session, v);
        } else if v.get("messages").is_some() {
            self.flush(ctx, |_| true);
            self.request(ctx, line, time, session, v);
        } else if v.get("error").is_some() {
            ctx.skip();
        } else {
            ctx.error(line, "object is not a Chat Completions request (`messages`), response or chunk (`choices`); check --format");
        }
    }

    fn scope(ctx: &Ctx<'_>, session: &Option<String>) -> String {
        session
            .clone()
            .unwrap_or_else(|| ctx.default_session().to_owned())
    }

    fn chunk(
        &mut self,
        ctx: &mut Ctx<'_>,
        line: usize,
        time: Timestamp,
        session: Option<String>,
        v: &Value,
    ) {
        let rid = str_field(v, "id").unwrap_or("").to_owned();
        // A new response closes the calls of the previous ones.
        self.flush(ctx, |(r, _)| r != &rid);
        let Some(choice) = v.get("choices").and_then(Value::as_array).and_then(|cs| {
            cs.iter()
                .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        }) else {
            ctx.skip();
            return;
        };
        let mut used = false;
        if let Some(calls) = choice
            .get("delta")
            .and_then(|d| d.get("tool_calls"))
            .and_then(Value::as_array)
        {
            for tc in calls {
                used = true;
                let f = tc.get("function").unwrap_or(&Value::Null);
                let name = str_field(f, "name");
                let index = match tc.get("index").and_then(Value::as_u64) {
                    Some(i) => i,
                    // Providers that omit `index`: a name starts a new call, pieces extend the last.
                    None => {
                        let n = self.partials.iter().filter(|((r, _), _)| r == &rid).count() as u64;
                        if name.is_some() || n == 0 {
                            n
                        } else {
                            n - 1
                        }
                    }
                };
                let key = (rid.clone(), index);
                let pos = match self.partials.iter().position(|(k, _)| k == &key) {
                    Some(p) => p,
                    None => {
                        self.partials.push((
                            key,
                            Partial {
                                id: None,
                                name: None,
                                args: String::new(),
                                line,
                                time,
                                session: session.clone(),
                            },
                        ));
                        self.partials.len() - 1
                    }
                };
                let p = &mut self.partials[pos].1;
                if p.id.is_none() {
                    p.id = str_field(tc, "id").map(str::to_owned);
                }
                if p.name.is_none() {
                    p.name = name.map(str::to_owned);
                }
                if let Some(piece) = f.get("arguments").and_then(Value::as_str) {
                    p.args.push_str(piece);
                }
            }
        }
        if choice.get("finish_reason").is_some_and(|f| !f.is_null()) {
            self.flush(ctx, |(r, _)| r == &rid);
            used = true;
        }
        if !used {
            ctx.skip();
        }
    }

    /// Emits the assembled calls whose key matches, in order of first appearance.
    fn flush(&mut self, ctx: &mut Ctx<'_>, which: impl Fn(&(String, u64)) -> bool) {
        let (done, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.partials)
            .into_iter()
            .partition(|(k, _)| which(k));
        self.partials = keep;
        for (_, p) in done {
            let Some(name) = p.name else {
                ctx.error(
                    p.line,
                    "streamed tool call never got a `function.name`; the stream is incomplete",
                );
                continue;
            };
            let scope = Self::scope(ctx, &p.session);
            self.history.entry(scope.clone()).or_default().calls += 1;
            let id = p.id.map(|id| self.ids.open(&scope, &id));
            let env = Env {
                session: p.session,
                call_id: id,
                time: p.time,
                ..Env::default()
            };
            ctx.announce(env, &name, Some(Value::String(p.args)));
        }
    }

    fn response(
        &mut self,
        ctx: &mut Ctx<'_>,
        line: usize,
        time: Timestamp,
        session: Option<String>,
        v: &Value,
    ) {
        let message = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
            })
            .and_then(|c| c.get("message"));
        let Some(message) = message else {
            ctx.error(
                line,
                "response has no `choices[0].message`; expected a chat.completion body",
            );
            return;
        };
        let calls = message_calls(message);
        if calls.is_empty() {
            ctx.skip();
        }
        let scope = Self::scope(ctx, &session);
        self.history.entry(scope).or_default().calls += calls.len();
        for (i, c) in calls.into_iter().enumerate() {
            self.announce_call(
                ctx,
                line,
                &format!("choices[0].message.tool_calls[{i}]"),
                time,
                &session,
                c,
            );
        }
    }

    fn request(
        &mut self,
        ctx: &mut Ctx<'_>,
        line: usize,
        time: Timestamp,
        session: Option<String>,
        v: &Value,
    ) {
        let Some(messages) = v.get("messages").and_then(Value::as_array) else {
            ctx.error(
                line,
                "request `messages` is not an array; expected a Chat Completions request body",
            );
            return;
        };
        let scope = Self::scope(ctx, &session);
        let h = self.history.entry(scope.clone()).or_default();
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
        let (seen_calls, seen_results) = (h.calls, h.results);
        let (mut calls, mut results) = (0usize, 0usize);
        let mut any = false;
        for (mi, m) in messages.iter().enumerate() {
            match str_field(m, "role") {
                Some("assistant") => {
                    for (ci, c) in message_calls(m).into_iter().enumerate() {
                        calls += 1;
                        if calls > seen_calls {
                            any = true;
                            self.announce_call(
                                ctx,
                                line,
                                &format!("messages[{mi}].tool_calls[{ci}]"),
                                time,
                                &session,
                                c,
                            );
                        }
                    }
                }
                Some(role @ ("tool" | "function")) => {
                    results += 1;
                    if results <= seen_results {
                        continue;
                    }
                    any = true;
                    let id = if role == "tool" {
                        str_field(m, "tool_call_id").map(|id| self.ids.close(&scope, id))
                    } else {
                        None
                    };
                    let env = Env {
                        session: session.clone(),
                        call_id: id,
                        time,
                        ..Env::default()
                    };
                    let c = Completion {
                        result: (m.get("content").cloned()).map(toolcalls_model::Json::from),
                        ..hints(str_field(m, "name"), None)
                    };
                    ctx.complete(env, c);
                }
                _ => {}
            }
        }
        let h = self.history.entry(scope).or_default();
        h.calls = h.calls.max(calls);
        h.results = h.results.max(results);
        if !any {
            ctx.skip();
        }
    }

    fn announce_call(
        &mut self,
        ctx: &mut Ctx<'_>,
        line: usize,
        at: &str,
        time: Timestamp,
        session: &Option<String>,
        c: &Value,
    ) {
        let f = c.get("function").unwrap_or(c);
        let Some(name) = str_field(f, "name") else {
            ctx.error_at(
                line,
                at,
                format!(
                    "tool call has no `function.name`: `{}`; skipped",
                    excerpt(&c.to_string())
                ),
            );
            return;
        };
        let scope = Self::scope(ctx, session);
        let id = str_field(c, "id").map(|id| self.ids.open(&scope, id));
        let env = Env {
            session: session.clone(),
            call_id: id,
            time,
            ..Env::default()
        };
        ctx.announce(env, name, f.get("arguments").cloned());
    }
}

/// The calls of an assistant message: `tool_calls[]`, or the legacy single `function_call`.
fn message_calls(m: &Value) -> Vec<&Value> {
    if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
        return calls.iter().collect();
    }
    m.get("function_call")
        .filter(|f| f.is_object())
        .into_iter()
        .collect()
}

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
pub(crate) fn responses(ctx: &mut Ctx<'_>, input: &[u8]) {
    let mut st = Responses::default();
    each_value(ctx, input, |ctx, line, index, v| {
        st.value(ctx, line, index, v)
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
    fn value(&mut self, ctx: &mut Ctx<'_>, line: usize, index: usize, v: &Value) {
        if !v.is_object() {
            ctx.error(
                line,
                "expected a JSON object (a Responses API event, response or request)",
            );
            return;
        }
        if v.get("request").is_some() || (v.get("response").is_some() && v.get("type").is_none()) {
            if let Some(req) = v.get("request") {
                self.value(ctx, line, index, req.get("body").unwrap_or(req));
            }
            match v.get("response").map(|r| r.get("body").unwrap_or(r)) {
                // A streamed response logged as its list of events.
                Some(Value::Array(events)) => {
                    for e in events {
                        self.value(ctx, line, index, e);
                    }
                }
                Some(r) => self.value(ctx, line, index, r),
                None => {}
            }
            return;
        }
        let kind = str_field(v, "type").unwrap_or("");
        if kind.starts_with("response.") {
            self.event(ctx, line, index, kind, v);
        } else if str_field(v, "object") == Some("response")
            || v.get("output").is_some_and(Value::is_array)
        {
            let time = ctx.clock.at(index, v.get("created_at").and_then(seconds));
            self.set_session(v);
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

    fn set_session(&mut self, response: &Value) {
        let conv = response.get("conversation").and_then(|c| match c {
            Value::String(s) => Some(s.as_str()),
            other => str_field(other, "id"),
        });
        if let Some(c) = conv {
            self.session = Some(c.to_owned());
        }
    }

    fn event(&mut self, ctx: &mut Ctx<'_>, line: usize, index: usize, kind: &str, v: &Value) {
        let response = v.get("response");
        let created = response.and_then(|r| r.get("created_at")).and_then(seconds);
        let time = ctx.clock.at(
            index,
            if kind == "response.created" {
                created
            } else {
                None
            },
        );
        match kind {
            "response.created" => {
                if let Some(r) = response {
                    self.set_session(r);
                }
                ctx.skip();
            }
            "response.output_item.added" => {
                let item = v.get("item").unwrap_or(&Value::Null);
                if let (Some("function_call" | "custom_tool_call"), Some(id)) =
                    (str_field(item, "type"), str_field(item, "id"))
                {
                    self.items.insert(
                        id.to_owned(),
                        Item {
                            call_id: str_field(item, "call_id").map(str::to_owned),
                            name: str_field(item, "name").map(str::to_owned),
                            args: String::new(),
                        },
                    );
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

    fn output(&mut self, ctx: &mut Ctx<'_>, line: usize, time: Timestamp, response: &Value) {
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
        ctx: &mut Ctx<'_>,
        line: usize,
        at: &str,
        time: Timestamp,
        item: &Value,
    ) -> bool {
        let Some(kind) = str_field(item, "type") else {
            return false;
        };
        let scope = self
            .session
            .clone()
            .unwrap_or_else(|| ctx.default_session().to_owned());
        let env = Env {
            session: self.session.clone(),
            time,
            ..Env::default()
        };
        let call_id = str_field(item, "call_id").map(str::to_owned);
        match kind {
            "function_call" | "custom_tool_call" | "computer_call" | "local_shell_call" => {
                let (name, args) = match kind {
                    "function_call" => (str_field(item, "name"), item.get("arguments")),
                    "custom_tool_call" => (str_field(item, "name"), item.get("input")),
                    "computer_call" => (Some("computer"), item.get("action")),
                    _ => (Some("local_shell"), item.get("action")),
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
                ctx.announce(Env { call_id, ..env }, name, args.cloned());
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
                    Env {
                        call_id: Some(id),
                        ..env
                    },
                    c,
                );
                true
            }
            "mcp_call" => {
                let (Some(id), Some(name)) = (str_field(item, "id"), str_field(item, "name"))
                else {
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
                let env = Env {
                    call_id: Some(id.to_owned()),
                    attributes: Some(attributes),
                    ..env
                };
                let args = item.get("arguments").cloned();
                ctx.announce(env.clone(), name, args.clone());
                let error = item.get("error").filter(|e| !e.is_null());
                let c = Completion {
                    result: (error.or_else(|| item.get("output")).cloned())
                        .map(toolcalls_model::Json::from),
                    is_error: error.is_some(),
                    ..hints(Some(name), args)
                };
                ctx.complete(env, c);
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{parse, Format, Options};
    use toolcalls_model::{EventBody, EventKind};

    fn ids(p: &crate::Parsed) -> Vec<(EventKind, Option<&str>)> {
        p.events
            .iter()
            .map(|e| (e.kind(), e.call_id.as_ref().map(|c| c.0.as_str())))
            .collect()
    }

    #[test]
    fn chat_stream_assembles_calls_with_the_id_only_in_the_first_chunk() {
        let s = r#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":""}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{}"}},{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]
"#;
        let p = parse(
            Format::OpenaiChat,
            "chat.sse",
            s.as_bytes(),
            &Options::default(),
        );
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert_eq!(
            ids(&p),
            [
                (EventKind::Announce, Some("call_a")),
                (EventKind::Announce, Some("call_b"))
            ]
        );
        let EventBody::Announce(a) = &p.events[0].body else {
            panic!()
        };
        assert_eq!(
            a.args.as_ref().map(|j| j.to_value()),
            Some(serde_json::Value::from("{\"city\":\"Paris\"}"))
        );
        assert_eq!(
            a.checksum,
            Some(toolcalls_model::checksum_of(
                "get_weather",
                Some(&serde_json::json!({"city": "Paris"}))
            ))
        );
        assert_eq!(p.events[0].time.millis(), 1_700_000_000_000);
        assert_eq!(p.events[0].source.as_str(), "openai");
    }

    #[test]
    fn chat_blank_and_repeated_ids() {
        // A provider that numbers calls per response (`call_0` every time) and one that sends blanks.
        let resp1 = r#"{"id":"r1","object":"chat.completion","created":1700000000,"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"ls","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#;
        let req2 = r#"{"messages":[{"role":"user","content":"go"},{"role":"assistant","tool_calls":[{"id":"call_0","type":"function","function":{"name":"ls","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_0","content":"a b"}]}"#;
        let resp2 = r#"{"id":"r2","object":"chat.completion","created":1700000005,"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"call_0","type":"function","function":{"name":"cat","arguments":"{\"f\":\"a\"}"}},{"id":"","type":"function","function":{"name":"cat","arguments":"{\"f\":\"b\"}"}}]},"finish_reason":"tool_calls"}]}"#;
        let req3 = r#"{"messages":[{"role":"user","content":"go"},{"role":"assistant","tool_calls":[{"id":"call_0","type":"function","function":{"name":"ls","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_0","content":"a b"},{"role":"assistant","tool_calls":[{"id":"call_0","type":"function","function":{"name":"cat","arguments":"{\"f\":\"a\"}"}},{"id":"","type":"function","function":{"name":"cat","arguments":"{\"f\":\"b\"}"}}]},{"role":"tool","tool_call_id":"call_0","content":"A"},{"role":"tool","tool_call_id":"","content":"B"}]}"#;
        let p = parse(
            Format::OpenaiChat,
            "c.jsonl",
            [resp1, req2, resp2, req3].join("\n").as_bytes(),
            &Options::default(),
        );
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        use EventKind::*;
        assert_eq!(
            ids(&p),
            [
                (Announce, Some("call_0")),
                (Completion, Some("call_0")),
                (Announce, Some("call_0#2")),
                (Announce, None),
                (Completion, Some("call_0#2")),
                (Completion, None),
            ]
        );
    }

    #[test]
    fn chat_chunks_without_index_and_cut_streams() {
        let s = [
            r#"{"id":"x1","object":"chat.completion.chunk","created":1700000000,"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c1","function":{"name":"a","arguments":"{\"k\":"}}]}}]}"#,
            r#"{"id":"x1","object":"chat.completion.chunk","created":1700000000,"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"1}"}}]}}]}"#,
            r#"{"id":"x1","object":"chat.completion.chunk","created":1700000000,"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c2","function":{"name":"b","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
            r#"{"id":"x2","object":"chat.completion.chunk","created":1700000001,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
        ];
        let p = parse(
            Format::OpenaiChat,
            "c.jsonl",
            s.join("\n").as_bytes(),
            &Options::default(),
        );
        assert_eq!(
            ids(&p),
            [
                (EventKind::Announce, Some("c1")),
                (EventKind::Announce, Some("c2"))
            ]
        );
        let EventBody::Announce(a) = &p.events[0].body else {
            panic!()
        };
        assert_eq!(
            a.args.as_ref().map(|j| j.to_value()),
            Some(serde_json::Value::from("{\"k\":1}"))
        );
        assert_eq!(p.errors.len(), 1, "{:?}", p.errors);
        assert_eq!(p.errors[0].line, 4);
        assert!(p.errors[0].message.contains("never got a `function.name`"));
    }

    #[test]
    fn responses_exchange_with_a_streamed_response() {
        let x = r#"{"request":{"input":[{"type":"function_call_output","call_id":"call_0a","output":"ok"}]},"response":[{"type":"response.created","response":{"id":"resp_2","created_at":1767398400,"output":[]}},{"type":"response.output_item.done","item":{"id":"fc_9","type":"function_call","call_id":"call_0b","name":"next","arguments":"{}"}}]}"#;
        let p = parse(
            Format::OpenaiResponses,
            "x.jsonl",
            x.as_bytes(),
            &Options::default(),
        );
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
        let p = parse(
            Format::OpenaiResponses,
            "r.json",
            r.as_bytes(),
            &Options::default(),
        );
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
        let p = parse(
            Format::OpenaiResponses,
            "r.chunks.txt",
            s.join("\n").as_bytes(),
            &Options::default(),
        );
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

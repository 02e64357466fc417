//! OpenAI Chat Completions.

use serde_json::Value;
use toolcalls_model::Completion;

use super::exchange::for_each_body;
use crate::bodies::{each_value, Conversations, Origin};
use crate::common::{excerpt, hints, seconds_field, str_field, text_field, ArgsWire, Ctx, IdScope};

/// A streamed tool call being assembled.
struct Partial {
    id: Option<String>,
    name: Option<String>,
    args: String,
    /// Where its first chunk was read; the call gets its time.
    origin: Origin,
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
pub(crate) fn chat(ctx: &mut Ctx, input: &[u8]) {
    let mut state = Chat::default();
    each_value(ctx, input, |ctx, line, index, v| {
        state.value(ctx, line, index, v)
    });
    state.flush(ctx, |_| true);
}

#[derive(Default)]
struct Chat {
    history: Conversations,
    ids: IdScope,
    /// Streamed calls by (response id, tool index), in order of first appearance.
    partials: Vec<((String, u64), Partial)>,
}

impl Chat {
    fn value(&mut self, ctx: &mut Ctx, line: usize, index: usize, v: &Value) {
        if !v.is_object() {
            ctx.error(
                line,
                "expected a JSON object (a Chat Completions request, response or chunk)",
            );
            return;
        }
        if v.get("request").is_some() || v.get("response").is_some() {
            for_each_body(v, |body| self.value(ctx, line, index, body));
            return;
        }
        let (time, session) = match (seconds_field(v, "created"), text_field(v, "session")) {
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
        let object = str_field(v, "object").unwrap_or("");
        let is_chunk = object == "chat.completion.chunk"
            || v.get("choices")
                .and_then(Value::as_array)
                .is_some_and(|c| c.iter().any(|c| c.get("delta").is_some()));
        if is_chunk {
            self.chunk(ctx, &origin, v);
        } else if v.get("choices").is_some() {
            self.flush(ctx, |_| true);
            self.response(ctx, &origin, v);
        } else if v.get("messages").is_some() {
            self.flush(ctx, |_| true);
            self.request(ctx, &origin, v);
        } else if v.get("error").is_some() {
            ctx.skip();
        } else {
            ctx.error(line, "object is not a Chat Completions request (`messages`), response or chunk (`choices`); check --format");
        }
    }

    fn chunk(&mut self, ctx: &mut Ctx, origin: &Origin, v: &Value) {
        let response_id = match text_field(v, "id") {
            Ok(id) => id.unwrap_or("").to_owned(),
            Err(problem) => {
                ctx.error(origin.line, problem);
                return;
            }
        };
        // A new response closes the calls of the previous ones.
        self.flush(ctx, |(r, _)| r != &response_id);
        let Some(choice) = first_choice(v) else {
            ctx.skip();
            return;
        };
        let mut used = false;
        if let Some(calls) = choice
            .get("delta")
            .and_then(|d| d.get("tool_calls"))
            .and_then(Value::as_array)
        {
            for (ci, tc) in calls.iter().enumerate() {
                used = true;
                let f = tc.get("function").unwrap_or(&Value::Null);
                let (name, id) = match (text_field(f, "name"), text_field(tc, "id")) {
                    (Ok(name), Ok(id)) => (name, id),
                    (Err(problem), _) | (_, Err(problem)) => {
                        let at = format!("choices[0].delta.tool_calls[{ci}]");
                        ctx.error_at(origin.line, at, format!("{problem}; skipped"));
                        continue;
                    }
                };
                let index = match tc.get("index").and_then(Value::as_u64) {
                    Some(i) => i,
                    // Providers that omit `index`: a name starts a new call, pieces extend the last.
                    None => {
                        let n = self
                            .partials
                            .iter()
                            .filter(|((r, _), _)| r == &response_id)
                            .count() as u64;
                        if name.is_some() || n == 0 {
                            n
                        } else {
                            n - 1
                        }
                    }
                };
                let key = (response_id.clone(), index);
                let pos = match self.partials.iter().position(|(k, _)| k == &key) {
                    Some(p) => p,
                    None => {
                        self.partials.push((
                            key,
                            Partial {
                                id: None,
                                name: None,
                                args: String::new(),
                                origin: origin.clone(),
                            },
                        ));
                        self.partials.len() - 1
                    }
                };
                let p = &mut self.partials[pos].1;
                if p.id.is_none() {
                    p.id = id.map(str::to_owned);
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
            self.flush(ctx, |(r, _)| r == &response_id);
            used = true;
        }
        if !used {
            ctx.skip();
        }
    }

    /// Emits the assembled calls whose key matches, in order of first appearance.
    fn flush(&mut self, ctx: &mut Ctx, which: impl Fn(&(String, u64)) -> bool) {
        let (done, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.partials)
            .into_iter()
            .partition(|(k, _)| which(k));
        self.partials = keep;
        for (_, p) in done {
            let Some(name) = p.name else {
                ctx.error(
                    p.origin.line,
                    "streamed tool call never got a `function.name`; the stream is incomplete",
                );
                continue;
            };
            self.history.of(ctx, &p.origin.session).calls += 1;
            let scope = ctx.session_or_default(&p.origin.session);
            let id = p.id.map(|id| self.ids.open(&scope, &id));
            ctx.announce_as(
                p.origin.envelope(id),
                &name,
                Some(Value::String(p.args)),
                ArgsWire::Encoded,
            );
        }
    }

    fn response(&mut self, ctx: &mut Ctx, origin: &Origin, v: &Value) {
        let message = first_choice(v).and_then(|c| c.get("message"));
        let Some(message) = message else {
            ctx.error(
                origin.line,
                "response has no `choices[0].message`; expected a chat.completion body",
            );
            return;
        };
        let calls = message_calls(message);
        if calls.is_empty() {
            ctx.skip();
        }
        self.history.of(ctx, &origin.session).calls += calls.len();
        for (i, c) in calls.into_iter().enumerate() {
            let at = format!("choices[0].message.tool_calls[{i}]");
            self.announce_call(ctx, origin, &at, c);
        }
    }

    fn request(&mut self, ctx: &mut Ctx, origin: &Origin, v: &Value) {
        let Some(messages) = v.get("messages").and_then(Value::as_array) else {
            ctx.error(
                origin.line,
                "request `messages` is not an array; expected a Chat Completions request body",
            );
            return;
        };
        let mut found = Vec::new();
        for (mi, m) in messages.iter().enumerate() {
            match str_field(m, "role") {
                Some("assistant") => found.extend(
                    message_calls(m)
                        .into_iter()
                        .enumerate()
                        .map(|(ci, c)| Item::Call(mi, ci, c)),
                ),
                Some(role @ ("tool" | "function")) => found.push(Item::Result(mi, role, m)),
                _ => {}
            }
        }
        let new = self
            .history
            .of(ctx, &origin.session)
            .unseen(messages.first(), found, |item| {
                matches!(item, Item::Call(..))
            });
        if new.is_empty() {
            ctx.skip();
        }
        let scope = ctx.session_or_default(&origin.session);
        for item in new {
            match item {
                Item::Call(mi, ci, c) => {
                    let at = format!("messages[{mi}].tool_calls[{ci}]");
                    self.announce_call(ctx, origin, &at, c);
                }
                Item::Result(mi, role, m) => {
                    let (id, name) = match (text_field(m, "tool_call_id"), text_field(m, "name")) {
                        (Ok(id), Ok(name)) => (id, name),
                        (Err(problem), _) | (_, Err(problem)) => {
                            let at = format!("messages[{mi}]");
                            ctx.error_at(origin.line, at, format!("{problem}; skipped"));
                            continue;
                        }
                    };
                    let id = if role == "tool" {
                        id.map(|id| self.ids.close(&scope, id))
                    } else {
                        None
                    };
                    let c = Completion {
                        result: (m.get("content").cloned()).map(toolcalls_model::Json::from),
                        ..hints(name, None)
                    };
                    ctx.complete(origin.envelope(id), c);
                }
            }
        }
    }

    /// Emits the call `c` found at `at` (a JSON path) of the value read at `origin`.
    fn announce_call(&mut self, ctx: &mut Ctx, origin: &Origin, at: &str, c: &Value) {
        let f = c.get("function").unwrap_or(c);
        let (name, id) = match (text_field(f, "name"), text_field(c, "id")) {
            (Ok(name), Ok(id)) => (name, id),
            (Err(problem), _) | (_, Err(problem)) => {
                ctx.error_at(origin.line, at, format!("{problem}; skipped"));
                return;
            }
        };
        let Some(name) = name else {
            ctx.error_at(
                origin.line,
                at,
                format!(
                    "tool call has no `function.name`: `{}`; skipped",
                    excerpt(&c.to_string())
                ),
            );
            return;
        };
        let scope = ctx.session_or_default(&origin.session);
        let id = id.map(|id| self.ids.open(&scope, id));
        ctx.announce_as(
            origin.envelope(id),
            name,
            f.get("arguments").cloned(),
            ArgsWire::Encoded,
        );
    }
}

/// A call or a result in a request's conversation.
enum Item<'v> {
    /// `messages[i].tool_calls[j]`.
    Call(usize, usize, &'v Value),
    /// `messages[i]`, a `tool` or `function` message.
    Result(usize, &'v str, &'v Value),
}

/// The first choice (`index` 0) of a response or chunk: the others are alternatives the client did
/// not act on.
fn first_choice(v: &Value) -> Option<&Value> {
    v.get("choices").and_then(Value::as_array).and_then(|cs| {
        cs.iter()
            .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
    })
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

#[cfg(test)]
mod tests {
    use crate::test_support::{kinds_and_ids as ids, parse_str};
    use crate::Format;
    use toolcalls_model::{EventBody, EventKind};

    #[test]
    fn chat_stream_assembles_calls_with_the_id_only_in_the_first_chunk() {
        let s = r#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":""}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{}"}},{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]
"#;
        let p = parse_str(Format::OpenaiChat, "chat.sse", s);
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
        let p = parse_str(
            Format::OpenaiChat,
            "c.jsonl",
            &[resp1, req2, resp2, req3].join("\n"),
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
        let p = parse_str(Format::OpenaiChat, "c.jsonl", &s.join("\n"));
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
}

//! Gemini: Gemini CLI session files, and Gemini API / Google ADK function calls.

use serde_json::Value;
use toolcalls_model::{Completion, EventBody};

use crate::bodies::{each_value, Conversations, Origin};
use crate::common::{
    excerpt, hints, rfc3339_field, seconds_field, str_field, text_field, Ctx, Envelope, IdScope,
};

/// Gemini CLI session files (`~/.gemini/tmp/<project>/chats/session-*.json`): one JSON document.
///
/// - `sessionId` is the session; each `user` message starts a turn (turn id = the message `id`).
/// - Gemini CLI stores each call already merged with its result (`toolCalls[]` of a `gemini`
///   message: `id`, `name`, `args`, `result`, `status`, `timestamp`). Each becomes an announce at the
///   message's time and a completion at the call's `timestamp` (when the tool finished), with the
///   tool and arguments again so the completion carries the checksum.
/// - `status: error` → an error; `status: cancelled` → a cancelled call. A call still `executing`
///   / `scheduled` / `awaiting_approval` when the file was written gets no completion.
/// - The ids (`<tool>-<epoch ms>-<random>`) are made by the CLI, not the model.
pub(crate) fn cli_session(ctx: &mut Ctx, input: &[u8]) {
    let Some(doc) = ctx.json_document(input) else {
        return;
    };
    let (session, start) = match (
        text_field(&doc, "sessionId"),
        rfc3339_field(&doc, "startTime"),
    ) {
        (Ok(session), Ok(start)) => (session.map(str::to_owned), start),
        (Err(problem), _) | (_, Err(problem)) => {
            ctx.error(1, format!("{problem}; the session file is left out"));
            return;
        }
    };
    let Some(messages) = doc.get("messages").and_then(Value::as_array) else {
        ctx.error(
            1,
            "session file has no `messages` array; expected a Gemini CLI session-*.json",
        );
        return;
    };
    let mut turn: Option<String> = None;
    for (mi, m) in messages.iter().enumerate() {
        let (native, id) = match (rfc3339_field(m, "timestamp"), text_field(m, "id")) {
            (Ok(native), Ok(id)) => (native, id),
            (Err(problem), _) | (_, Err(problem)) => {
                ctx.error_at(1, format!("messages[{mi}]"), format!("{problem}; skipped"));
                continue;
            }
        };
        let time = ctx
            .clock
            .at(mi, native.or(if mi == 0 { start } else { None }));
        match str_field(m, "type") {
            Some("user") => {
                turn = id.map(str::to_owned).or_else(|| Some(format!("m{mi}")));
                ctx.skip();
            }
            Some("gemini") => {
                let Some(calls) = m.get("toolCalls").and_then(Value::as_array) else {
                    ctx.skip();
                    continue;
                };
                for (ti, tc) in calls.iter().enumerate() {
                    let at = format!("messages[{mi}].toolCalls[{ti}]");
                    let (name, id, finished) = match (
                        text_field(tc, "name"),
                        text_field(tc, "id"),
                        rfc3339_field(tc, "timestamp"),
                    ) {
                        (Ok(name), Ok(id), Ok(finished)) => (name, id, finished),
                        (Err(problem), _, _) | (_, Err(problem), _) | (_, _, Err(problem)) => {
                            ctx.error_at(1, at, format!("{problem}; skipped"));
                            continue;
                        }
                    };
                    let Some(name) = name else {
                        ctx.error_at(1, at, "tool call has no `name`; skipped");
                        continue;
                    };
                    let env = Envelope {
                        session: session.clone(),
                        turn: turn.clone(),
                        call_id: id.map(str::to_owned),
                        time,
                        ..Envelope::default()
                    };
                    let args = tc.get("args").cloned();
                    ctx.announce(env.clone(), name, args.clone());
                    let status = str_field(tc, "status").unwrap_or("");
                    if !matches!(status, "success" | "error" | "cancelled") {
                        if status.is_empty() {
                            ctx.error_at(
                                1,
                                at,
                                "tool call has no `status`; only its announce is emitted",
                            );
                        }
                        continue;
                    }
                    let done = finished.map_or(time, |t| t.max(time));
                    let c = Completion {
                        result: (tc.get("result").map(cli_result)).map(toolcalls_model::Json::from),
                        is_error: status == "error",
                        cancelled: status == "cancelled",
                        ..hints(Some(name), args)
                    };
                    ctx.complete(Envelope { time: done, ..env }, c);
                }
            }
            _ => ctx.skip(),
        }
    }
}

/// The `response` of a single `functionResponse` part, else the stored result as it is.
fn cli_result(result: &Value) -> Value {
    if let Some([part]) = result.as_array().map(Vec::as_slice) {
        if let Some(r) = function_response(part).and_then(|fr| fr.get("response")) {
            return r.clone();
        }
    }
    result.clone()
}

/// The `name` and `id` of a `functionCall` or `functionResponse`.
fn name_and_id(v: &Value) -> Result<(Option<&str>, Option<&str>), String> {
    Ok((text_field(v, "name")?, text_field(v, "id")?))
}

fn function_call(part: &Value) -> Option<&Value> {
    part.get("functionCall")
        .or_else(|| part.get("function_call"))
        .filter(|v| v.is_object())
}

fn function_response(part: &Value) -> Option<&Value> {
    part.get("functionResponse")
        .or_else(|| part.get("function_response"))
        .filter(|v| v.is_object())
}

/// Gemini API bodies and Google ADK events.
///
/// Reads, one JSON value per line (or SSE `data:` lines, or one document / array):
/// - `generateContent` requests (`contents`) and responses (`candidates`), or
///   `{"request", "response"}` exchanges. Requests repeat the conversation, so parts are counted by
///   position and only new ones are emitted.
/// - ADK events (`invocationId`, `author`, `content.parts`, `timestamp` in seconds) and ADK session
///   documents (`{"id", "appName", "events": [...]}`): the session id is the session, the
///   invocation is the turn, the author is the agent.
///
/// `functionCall` parts are announces and `functionResponse` parts completions (with the tool
/// `name` as a hint). `id` is optional in both and often absent; a `response` holding an `error`
/// key is an error (the ADK convention).
pub(crate) fn api(ctx: &mut Ctx, input: &[u8]) {
    let mut state = Api::default();
    each_value(ctx, input, |ctx, line, index, v| {
        state.value(ctx, line, index, v, None)
    });
}

#[derive(Default)]
struct Api {
    history: Conversations,
    ids: IdScope,
}

impl Api {
    fn value(
        &mut self,
        ctx: &mut Ctx,
        line: usize,
        index: usize,
        v: &Value,
        session: Option<&str>,
    ) {
        if !v.is_object() {
            ctx.error(
                line,
                "expected a JSON object (a Gemini request, response, ADK event or session)",
            );
            return;
        }
        if let Some(events) = v.get("events").and_then(Value::as_array) {
            let session = match text_field(v, "id") {
                Ok(id) => id.or(session).map(str::to_owned),
                Err(problem) => {
                    ctx.error(line, format!("{problem}; the ADK session is left out"));
                    return;
                }
            };
            for (i, e) in events.iter().enumerate() {
                self.adk_event(ctx, line, i, e, session.as_deref());
            }
            return;
        }
        if v.get("invocationId")
            .or_else(|| v.get("invocation_id"))
            .is_some()
            || v.get("author").is_some()
        {
            self.adk_event(ctx, line, index, v, session);
            return;
        }
        let named = match text_field(v, "session") {
            Ok(named) => named,
            Err(problem) => {
                ctx.error(line, problem);
                return;
            }
        };
        let origin = Origin {
            line,
            time: ctx.clock.at(index, None),
            session: named.or(session).map(str::to_owned),
        };
        if v.get("request").is_some() || v.get("response").is_some() {
            if let Some(req) = v.get("request") {
                self.request(ctx, &origin, req);
            }
            if let Some(resp) = v.get("response") {
                self.response(ctx, &origin, resp);
            }
        } else if v.get("contents").is_some() {
            self.request(ctx, &origin, v);
        } else if v.get("candidates").is_some() {
            self.response(ctx, &origin, v);
        } else {
            ctx.error(
                line,
                "object is not a Gemini request (`contents`), response (`candidates`), ADK event or ADK session; check --format",
            );
        }
    }

    fn request(&mut self, ctx: &mut Ctx, origin: &Origin, req: &Value) {
        let Some(contents) = req.get("contents").and_then(Value::as_array) else {
            ctx.error(
                origin.line,
                "request has no `contents` array; expected a generateContent request body",
            );
            return;
        };
        let mut found = Vec::new();
        for (ci, c) in contents.iter().enumerate() {
            let parts = c
                .get("parts")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            for (pi, part) in parts.iter().enumerate() {
                if function_call(part).is_some() || function_response(part).is_some() {
                    found.push((ci, pi, part));
                }
            }
        }
        let new = self.history.of(ctx, &origin.session).unseen(
            contents.first(),
            found,
            |(_, _, part)| function_call(part).is_some(),
        );
        for (ci, pi, part) in new {
            let at = format!("contents[{ci}].parts[{pi}]");
            self.part(ctx, origin, &at, None, None, part);
        }
    }

    fn response(&mut self, ctx: &mut Ctx, origin: &Origin, resp: &Value) {
        let Some(candidates) = resp.get("candidates").and_then(Value::as_array) else {
            ctx.error(
                origin.line,
                "response has no `candidates` array; expected a generateContent response body",
            );
            return;
        };
        // Only the first candidate is the conversation's continuation.
        let parts = candidates
            .first()
            .and_then(|c| c.get("content"))
            .and_then(|c| c.get("parts"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let n = parts.iter().filter(|p| function_call(p).is_some()).count();
        self.history.of(ctx, &origin.session).calls += n;
        if n == 0 {
            ctx.skip();
        }
        for (pi, part) in parts.iter().enumerate() {
            if function_call(part).is_some() {
                let at = format!("candidates[0].content.parts[{pi}]");
                self.part(ctx, origin, &at, None, None, part);
            }
        }
    }

    fn adk_event(
        &mut self,
        ctx: &mut Ctx,
        line: usize,
        index: usize,
        e: &Value,
        session: Option<&str>,
    ) {
        let read = || -> Result<_, String> {
            let turn = match text_field(e, "invocationId")? {
                Some(turn) => Some(turn),
                None => text_field(e, "invocation_id")?,
            };
            Ok((
                seconds_field(e, "timestamp")?,
                turn,
                text_field(e, "author")?,
            ))
        };
        let (time, turn, author) = match read() {
            Ok(fields) => fields,
            Err(problem) => {
                ctx.error_at(
                    line,
                    format!("events[{index}]"),
                    format!("{problem}; skipped"),
                );
                return;
            }
        };
        let origin = Origin {
            line,
            time: ctx.clock.at(index, time),
            session: session.map(str::to_owned),
        };
        let parts = e
            .get("content")
            .and_then(|c| c.get("parts"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let mut any = false;
        for (pi, part) in parts.iter().enumerate() {
            if function_call(part).is_some() || function_response(part).is_some() {
                any = true;
                let at = format!("events[{index}].content.parts[{pi}]");
                self.part(ctx, &origin, &at, turn, author, part);
            }
        }
        if !any {
            ctx.skip();
        }
    }

    /// Emits a `functionCall` or `functionResponse` part found at `at` (a JSON path).
    fn part(
        &mut self,
        ctx: &mut Ctx,
        origin: &Origin,
        at: &str,
        turn: Option<&str>,
        author: Option<&str>,
        part: &Value,
    ) {
        let scope = ctx.session_or_default(&origin.session);
        let env = Envelope {
            turn: turn.map(str::to_owned),
            ..origin.envelope(None)
        };
        let named = function_call(part).or_else(|| function_response(part));
        let fields = match named.map(name_and_id) {
            Some(Ok(fields)) => fields,
            Some(Err(problem)) => {
                ctx.error_at(origin.line, at, format!("{problem}; skipped"));
                return;
            }
            None => return,
        };
        let (name, id) = fields;
        if let Some(fc) = function_call(part) {
            let Some(name) = name else {
                ctx.error_at(
                    origin.line,
                    at,
                    format!(
                        "functionCall has no `name`: `{}`; skipped",
                        excerpt(&fc.to_string())
                    ),
                );
                return;
            };
            let id = id.map(|id| self.ids.open(&scope, id));
            let i = ctx.announce(
                Envelope { call_id: id, ..env },
                name,
                fc.get("args").cloned(),
            );
            if let (Some(author), EventBody::Announce(a)) = (author, &mut ctx.events_mut()[i].body)
            {
                a.agent = Some(author.to_owned());
            }
        } else if let Some(fr) = function_response(part) {
            let id = id.map(|id| self.ids.close(&scope, id));
            let response = fr.get("response").cloned();
            let is_error = response
                .as_ref()
                .and_then(|r| r.get("error"))
                .is_some_and(|e| !e.is_null());
            let c = Completion {
                result: (response).map(toolcalls_model::Json::from),
                is_error,
                ..hints(name, None)
            };
            ctx.complete(Envelope { call_id: id, ..env }, c);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::parse_str;
    use crate::Format;
    use toolcalls_model::{EventBody, EventKind};

    #[test]
    fn cli_session_splits_merged_calls() {
        let doc = r#"{
  "sessionId": "g-1",
  "projectHash": "abc",
  "startTime": "2025-10-27T19:56:01.701Z",
  "messages": [
    {"id": "u1", "timestamp": "2025-10-27T19:56:01.701Z", "type": "user", "content": "list files"},
    {"id": "m1", "timestamp": "2025-10-27T19:56:04.625Z", "type": "gemini", "content": "", "toolCalls": [
      {"id": "ls-1", "name": "list_directory", "args": {"path": "/p"}, "status": "success", "timestamp": "2025-10-27T19:56:05.000Z",
       "result": [{"functionResponse": {"id": "ls-1", "name": "list_directory", "response": {"output": "empty"}}}]},
      {"id": "sh-1", "name": "run_shell_command", "args": {"command": "python3"}, "status": "cancelled", "timestamp": "2025-10-27T19:57:00.000Z",
       "result": [{"functionResponse": {"id": "sh-1", "name": "run_shell_command", "response": {"error": "[Operation Cancelled]"}}}]},
      {"id": "ls-2", "name": "list_directory", "args": {"path": "."}, "status": "error", "timestamp": "2025-10-27T19:57:01.000Z",
       "result": [{"functionResponse": {"id": "ls-2", "name": "list_directory", "response": {"error": "Path must be absolute"}}}]},
      {"id": "x", "args": {}},
      {"id": "w-1", "name": "write_file", "args": {}, "status": "executing"}
    ]}
  ]
}"#;
        let p = parse_str(Format::GeminiCli, "session.json", doc);
        assert_eq!(p.errors.len(), 1);
        assert_eq!(p.errors[0].at.as_deref(), Some("messages[1].toolCalls[3]"));
        use EventKind::*;
        let got: Vec<_> = p
            .events
            .iter()
            .map(|e| (e.kind(), e.call_id.as_ref().unwrap().0.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (Announce, "ls-1"),
                (Completion, "ls-1"),
                (Announce, "sh-1"),
                (Completion, "sh-1"),
                (Announce, "ls-2"),
                (Completion, "ls-2"),
                (Announce, "w-1"),
            ]
        );
        let EventBody::Completion(ok) = &p.events[1].body else {
            panic!()
        };
        assert_eq!(
            ok.result.as_ref().map(|j| j.to_value()),
            Some(serde_json::json!({"output": "empty"}))
        );
        assert!(ok.checksum.is_some());
        assert_eq!(p.events[1].time.to_rfc3339(), "2025-10-27T19:56:05.000Z");
        assert_eq!(p.events[0].time.to_rfc3339(), "2025-10-27T19:56:04.625Z");
        let EventBody::Completion(c) = &p.events[3].body else {
            panic!()
        };
        assert!(c.cancelled && !c.is_error);
        let EventBody::Completion(c) = &p.events[5].body else {
            panic!()
        };
        assert!(c.is_error && !c.cancelled);
        assert!(p
            .events
            .iter()
            .all(|e| e.session.as_str() == "g-1" && e.turn.as_ref().unwrap().as_str() == "u1"));
    }

    #[test]
    fn api_exchanges_without_ids() {
        let req1 = r#"{"contents":[{"role":"user","parts":[{"text":"weather?"}]}],"tools":[{"functionDeclarations":[{"name":"get_weather"}]}]}"#;
        let resp1 = r#"{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Oslo"}}},{"functionCall":{"name":"get_weather","args":{"city":"Bergen"}}}]},"finishReason":"STOP"}]}"#;
        let req2 = r#"{"contents":[{"role":"user","parts":[{"text":"weather?"}]},{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Oslo"}}},{"functionCall":{"name":"get_weather","args":{"city":"Bergen"}}}]},{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"temp":3}}},{"functionResponse":{"name":"get_weather","response":{"error":"station offline"}}}]}]}"#;
        let p = parse_str(Format::Gemini, "g.jsonl", &[req1, resp1, req2].join("\n"));
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert_eq!(p.events.len(), 4);
        assert!(p.events.iter().all(|e| e.call_id.is_none()));
        let EventBody::Completion(c) = &p.events[3].body else {
            panic!()
        };
        assert!(c.is_error);
        assert_eq!(c.tool.as_deref(), Some("get_weather"));
    }

    #[test]
    fn adk_session_with_ids_and_invocations() {
        let doc = r#"{"id":"adk-s1","appName":"weather","userId":"u","events":[
          {"id":"e1","invocationId":"e-inv1","author":"user","timestamp":1761734225.5,"content":{"role":"user","parts":[{"text":"hi"}]}},
          {"id":"e2","invocationId":"e-inv1","author":"weather_agent","timestamp":1761734226.0,"content":{"role":"model","parts":[{"functionCall":{"id":"adk-1","name":"get_weather","args":{"city":"Oslo"}}}]}},
          {"id":"e3","invocationId":"e-inv1","author":"weather_agent","timestamp":1761734226.25,"content":{"role":"user","parts":[{"functionResponse":{"id":"adk-1","name":"get_weather","response":{"temp":3}}}]}}
        ]}"#;
        let p = parse_str(Format::Gemini, "adk.json", doc);
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert_eq!(p.events.len(), 2);
        for e in &p.events {
            assert_eq!(e.session.as_str(), "adk-s1");
            assert_eq!(e.turn.as_ref().unwrap().as_str(), "e-inv1");
            assert_eq!(e.call_id.as_ref().unwrap().as_str(), "adk-1");
        }
        assert_eq!(p.events[1].time.millis(), 1_761_734_226_250);
        let EventBody::Announce(a) = &p.events[0].body else {
            panic!()
        };
        assert_eq!(a.agent.as_deref(), Some("weather_agent"));
    }
}

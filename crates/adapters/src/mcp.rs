//! MCP JSON-RPC message logs.

use std::collections::HashMap;

use serde_json::Value;
use toolcalls_model::{Completion, Timestamp};

use crate::common::{
    first_of, id_field, loose_time_field, str_field, text_field, Ctx, Envelope, IdScope,
};
use crate::line_reader::LineReader;

/// Which side sent a message, as far as the log says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Side {
    Client,
    Server,
    Unknown,
}

impl Side {
    fn other(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
            Side::Unknown => Side::Unknown,
        }
    }

    fn tag(self) -> &'static str {
        match self {
            Side::Client => "c",
            Side::Server => "s",
            Side::Unknown => "?",
        }
    }
}

/// The sender named by a log's `direction` field. `outgoing` / `incoming` are read from the client's
/// side, where MCP traffic is usually logged (inspectors, proxies, client SDK loggers).
fn sender(direction: Option<&str>) -> Side {
    let Some(d) = direction else {
        return Side::Unknown;
    };
    let d = d.to_ascii_lowercase().replace([' ', '_', '-'], "");
    match d.as_str() {
        "client>server" | "clienttoserver" | "c2s" | "outgoing" | "out" | "send" | "sent"
        | "tx" | "request" => Side::Client,
        "server>client" | "servertoclient" | "s2c" | "incoming" | "in" | "recv" | "received"
        | "rx" | "response" => Side::Server,
        _ => Side::Unknown,
    }
}

/// MCP JSON-RPC logs: one message per line, bare (`{"jsonrpc": "2.0", …}`), as a batch array, or
/// wrapped by a logger (`{"timestamp", "session" | "sessionId", "direction", "message": {…}}`).
///
/// - A `tools/call` request is an announce (`params.name`, `params.arguments`); its response is the
///   completion (`result`, with `result.isError`, or a JSON-RPC `error` — both errors).
///   `notifications/cancelled` for a pending call is a cancelled completion.
/// - JSON-RPC ids are unique only per session and per sending side, so requests are looked up by
///   (session, side, id), and an id reused for a later call in the same session is renamed (see the
///   crate docs). Responses to other methods (`initialize`, `tools/list`, …) are skipped.
/// - Session: the wrapper's session (or `Mcp-Session-Id`), else `--session` or the file name.
///   Time: the wrapper's timestamp (RFC 3339 or epoch s / ms / µs / ns), else the clock rule.
/// - Bare messages carry neither session, time nor direction.
#[derive(Default)]
pub(crate) struct McpLog(Mcp);

impl LineReader for McpLog {
    fn line(&mut self, ctx: &mut Ctx, line: usize, bytes: &[u8]) {
        let Some(v) = ctx.json_line(line, bytes) else {
            return;
        };
        let bare = v.is_array() || v.get("jsonrpc").is_some() || v.get("method").is_some();
        let (meta, message) = if bare {
            (None, &v)
        } else {
            let m = ["message", "payload", "data", "msg", "body"]
                .iter()
                .find_map(|k| v.get(*k));
            match m {
                Some(m) => (Some(&v), m),
                None => {
                    ctx.error(line, "line is neither a JSON-RPC message nor a wrapper with `message`; expected an MCP JSON-RPC log");
                    return;
                }
            }
        };
        let (native, session) = match meta.map(wrapper_fields).transpose() {
            Ok(fields) => fields.unwrap_or_default(),
            Err(problem) => {
                ctx.error(line, problem);
                return;
            }
        };
        let time = ctx.clock.at(line - 1, native);
        let session = session.map(str::to_owned);
        let side =
            sender(meta.and_then(|m| str_field(m, "direction").or_else(|| str_field(m, "dir"))));
        match message {
            Value::Array(batch) => {
                for m in batch {
                    self.0.message(ctx, line, time, &session, side, m);
                }
            }
            m => self.0.message(ctx, line, time, &session, side, m),
        }
    }
}

/// The time and session a logger's wrapper gives its message.
fn wrapper_fields(meta: &Value) -> Result<(Option<Timestamp>, Option<&str>), String> {
    let time = first_of(meta, &["timestamp", "time", "ts"], loose_time_field)?;
    let session = first_of(
        meta,
        &[
            "session",
            "sessionId",
            "session_id",
            "mcpSessionId",
            "Mcp-Session-Id",
            "mcp-session-id",
        ],
        text_field,
    )?;
    Ok((time, session))
}

#[derive(Default)]
struct Mcp {
    /// Requests awaiting a response: (session, requesting side, id) → method.
    pending: HashMap<(String, Side, String), String>,
    ids: IdScope,
}

impl Mcp {
    fn message(
        &mut self,
        ctx: &mut Ctx,
        line: usize,
        time: Timestamp,
        session: &Option<String>,
        side: Side,
        m: &Value,
    ) {
        if !m.is_object() {
            ctx.error(line, "JSON-RPC message is not an object");
            return;
        }
        let session_key = ctx.session_or_default(session);
        let id = match id_field(m, "id") {
            Ok(id) => id,
            Err(problem) => {
                ctx.error(line, problem);
                return;
            }
        };
        let env = Envelope {
            session: session.clone(),
            time,
            ..Envelope::default()
        };
        if let Some(method) = str_field(m, "method") {
            let Some(id) = id else {
                // A notification; only a cancellation matters here.
                if method == "notifications/cancelled" {
                    let params = m.get("params").unwrap_or(&Value::Null);
                    let request_id = match id_field(params, "requestId") {
                        Ok(request_id) => request_id,
                        Err(problem) => {
                            ctx.error(line, format!("notifications/cancelled: {problem}"));
                            return;
                        }
                    };
                    if let Some(request_id) = request_id {
                        let key = (session_key.clone(), side, request_id.clone());
                        if self.pending.get(&key).is_some_and(|m| m == "tools/call") {
                            self.pending.remove(&key);
                            let scope = format!("{session_key}\u{0}{}", side.tag());
                            let call = self.ids.close(&scope, &request_id);
                            let c = Completion {
                                result: (params.get("reason").cloned())
                                    .map(toolcalls_model::Json::from),
                                cancelled: true,
                                ..Completion::default()
                            };
                            ctx.complete(
                                Envelope {
                                    call_id: Some(call),
                                    ..env
                                },
                                c,
                            );
                            return;
                        }
                    }
                }
                ctx.skip();
                return;
            };
            self.pending
                .insert((session_key.clone(), side, id.clone()), method.to_owned());
            if method != "tools/call" {
                ctx.skip();
                return;
            }
            let params = m.get("params").unwrap_or(&Value::Null);
            let tool = match text_field(params, "name") {
                Ok(tool) => tool,
                Err(problem) => {
                    ctx.error(line, format!("tools/call request {id}: {problem}"));
                    return;
                }
            };
            let Some(tool) = tool else {
                ctx.error(
                    line,
                    format!(
                        "tools/call request {id} has no `params.name`; the message is malformed"
                    ),
                );
                return;
            };
            let scope = format!("{session_key}\u{0}{}", side.tag());
            let call = self.ids.open(&scope, &id);
            ctx.announce(
                Envelope {
                    call_id: Some(call),
                    ..env
                },
                tool,
                params.get("arguments").cloned(),
            );
            return;
        }
        let (result, error) = (m.get("result"), m.get("error").filter(|e| !e.is_null()));
        if result.is_none() && error.is_none() {
            ctx.error(
                line,
                "JSON-RPC message has neither `method`, `result` nor `error`",
            );
            return;
        }
        let Some(id) = id else {
            // An error without id (a parse error reported by the peer): not about a call.
            ctx.skip();
            return;
        };
        let requester = side.other();
        let key = (session_key.clone(), requester, id.clone());
        let method = self.pending.remove(&key);
        let looks_like_tool_result = result.is_some_and(|r| {
            r.get("content").is_some_and(Value::is_array) || r.get("isError").is_some()
        });
        match method.as_deref() {
            Some("tools/call") => {}
            None if looks_like_tool_result => {}
            _ => {
                ctx.skip();
                return;
            }
        }
        let scope = format!("{session_key}\u{0}{}", requester.tag());
        let call = self.ids.close(&scope, &id);
        let is_error = error.is_some()
            || result
                .and_then(|r| r.get("isError"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
        let c = Completion {
            result: (error.or(result).cloned()).map(toolcalls_model::Json::from),
            is_error,
            ..Completion::default()
        };
        ctx.complete(
            Envelope {
                call_id: Some(call),
                ..env
            },
            c,
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::parse_str;
    use crate::Format;
    use toolcalls_model::{EventBody, EventKind};

    #[test]
    fn tools_call_requests_and_responses_scoped_by_session() {
        let s = include_str!("../tests/data/mcp-proxy.jsonl");
        let p = parse_str(Format::Mcp, "mcp-proxy.jsonl", s);
        assert_eq!(p.errors.len(), 1, "{:?}", p.errors);
        assert!(p.errors[0].message.contains("no `params.name`"));
        use EventKind::*;
        let got: Vec<_> = p
            .events
            .iter()
            .map(|e| {
                (
                    e.kind(),
                    e.session.as_str(),
                    e.call_id.as_ref().unwrap().as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (Announce, "sess-a", "1"),
                (Announce, "sess-b", "1"),
                (Completion, "sess-b", "1"),
                (Completion, "sess-a", "1"),
                (Announce, "sess-a", "2"),
                (Completion, "sess-a", "2"),
                (Announce, "sess-a", "3"),
                (Completion, "sess-a", "3"),
                (Announce, "sess-a", "1#2"),
                (Completion, "sess-a", "1#2"),
            ]
        );
        let flags: Vec<_> = p
            .events
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::Completion(c) => Some((c.is_error, c.cancelled)),
                _ => None,
            })
            .collect();
        assert_eq!(
            flags,
            [
                (false, false),
                (false, false),
                (true, false),
                (false, true),
                (true, false)
            ]
        );
        assert_eq!(p.events[0].time.to_rfc3339(), "2026-03-02T09:00:01.000Z");
    }

    #[test]
    fn bare_messages_and_batches() {
        let s = [
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#,
            r#"[{"jsonrpc":"2.0","id":"a","result":{"content":[{"type":"text","text":"hi"}]}},{"jsonrpc":"2.0","method":"notifications/progress","params":{}}]"#,
            r#"{"jsonrpc":"2.0","id":"zz","result":{"content":[],"isError":false}}"#,
            r#"{"jsonrpc":"2.0","id":"q"}"#,
        ];
        let p = parse_str(Format::Mcp, "raw.jsonl", &s.join("\n"));
        assert_eq!(p.errors.len(), 1);
        assert_eq!(p.errors[0].line, 4);
        assert_eq!(
            p.events.len(),
            3,
            "the response to an unseen request is kept as an orphan result"
        );
        assert!(p.events.iter().all(|e| e.session.as_str() == "raw"));
    }
}

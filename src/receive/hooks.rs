//! `POST /v1/hooks/claude-code`: Claude Code hook payloads (PreToolUse, PostToolUse,
//! PostToolUseFailure, PermissionRequest, Stop, SessionEnd, …), one per request as a hook command
//! posts its standard input, or several as JSON lines. Read by the claude-code-hooks adapter.
//!
//! Hook payloads carry no time: the event time is the time the request was received (line *i*
//! of a request gets that time plus *i* ms, the adapter's rule for formats without times), made
//! later where needed so that no two requests of a session share a millisecond
//! ([`super::stamps`]); a payload that does carry one (`timestamp`, as a logging hook may add)
//! keeps it. The answer is
//! 204 with an empty body, so that a hook command that prints what it gets shows nothing.

use super::state::Shared;
use super::{reading, reply};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use toolcalls_adapters::{parse, Format, Options};
use toolcalls_model::{Event, Timestamp};

pub const ROUTE: &str = "hooks/claude-code";

pub async fn claude_code(
    State(s): State<Arc<Shared>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match reply::body(&s, body) {
        Ok(b) => b,
        Err(r) => return r.into_response(),
    };
    let stamps = s.clone();
    let received =
        move |sessions: &[String], lines: usize| stamps.stamps.reserve(sessions, lines, now());
    let (events, _turn) = match reading::events(&s.readers, body, |b| read(b, received)).await {
        Ok(read) => read,
        Err(unread) => return reply::unread(&s, unread),
    };
    match reply::deliver(&s, ROUTE, &events).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(r) => r.into_response(),
    }
}

/// The receive time, in milliseconds.
fn now() -> Timestamp {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp::from_millis(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
}

/// The events of a request's hook payloads, stamped where they carry no time with the time
/// `received` gives for the request's sessions and number of lines (its line *i* that time plus
/// *i* ms); or why the payload cannot be read.
pub fn read(
    body: &[u8],
    received: impl FnOnce(&[String], usize) -> Timestamp,
) -> Result<Vec<Event>, String> {
    let text = body.trim_ascii();
    if text.is_empty() {
        return Err(
            "the body is empty; expected a Claude Code hook payload (the hook's standard input)"
                .into(),
        );
    }
    // One payload written over several lines (pretty-printed): the adapter reads lines.
    let compact;
    let input = if text.contains(&b'\n') && toolcalls_adapters::value::parse(text).is_ok() {
        // Outside strings a newline is whitespace, and inside them JSON escapes it: the payload
        // on one line, its text otherwise as sent (lone surrogates included).
        compact = text
            .iter()
            .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b })
            .collect::<Vec<u8>>();
        &compact[..]
    } else {
        text
    };
    let (sessions, sessionless) = sessions(input);
    let lines = input.split(|&b| b == b'\n').count();
    let options = Options {
        base_time: Some(received(&sessions, lines)),
        ..Options::default()
    };
    let parsed = parse(Format::ClaudeCodeHooks, "request", input, &options);
    let mut problems: Vec<String> = parsed.errors.iter().map(ToString::to_string).collect();
    problems.extend(sessionless);
    if !problems.is_empty() {
        return Err(reply::reasons(&problems));
    }
    Ok(parsed.events)
}

/// The sessions the payloads of `input` (one per line) name, and the payloads that name none. A
/// file of hook payloads that names none is filed under its name; a request has no name to stand
/// in, and one it made up would put every client's calls in one session, where they could take
/// each other's results.
fn sessions(input: &[u8]) -> (Vec<String>, Vec<String>) {
    let (mut named_sessions, mut out) = (Vec::new(), Vec::new());
    for (i, line) in input.split(|&b| b == b'\n').enumerate() {
        let Ok(serde_json::Value::Object(payload)) = toolcalls_adapters::value::parse(line) else {
            // Not a payload: the adapter says so.
            continue;
        };
        let named = match payload.get("session_id") {
            Some(serde_json::Value::String(s)) => {
                named_sessions.push(s.clone());
                !s.trim().is_empty()
            }
            // Of another type: the adapter says so.
            Some(v) => !v.is_null(),
            None => false,
        };
        if !named {
            out.push(format!(
                "request:{}: the payload has no `session_id`; a Claude Code hook payload names its session, which keys its calls",
                i + 1
            ));
        }
    }
    (named_sessions, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_that_names_no_session_is_refused() {
        let at = Timestamp::from_millis(1_780_000_000_000);
        let named = r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{},"tool_use_id":"x1"}"#;
        assert!(read(named.as_bytes(), |_, _| at).is_ok());
        for session in [
            "",
            r#","session_id":"""#,
            r#","session_id":" ""#,
            r#","session_id":null"#,
        ] {
            let payload = format!(
                r#"{{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{{}},"tool_use_id":"x1"{session}}}"#
            );
            let why = read(payload.as_bytes(), |_, _| at).unwrap_err();
            assert!(
                why.contains("request:1: the payload has no `session_id`"),
                "{why}"
            );
            // Beside a good one, on the second line: named by its line, and nothing is taken.
            let two = format!("{named}\n{payload}");
            let why = read(two.as_bytes(), |_, _| at).unwrap_err();
            assert!(why.contains("request:2:"), "{why}");
        }
    }

    #[test]
    fn payloads_are_stamped_with_the_receive_time() {
        let at = Timestamp::from_millis(1_780_000_000_000);
        let pre = br#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"toolu_1"}"#;
        let events = read(pre, |_, _| at).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].time, at);
        let pretty =
            serde_json::to_vec_pretty(&serde_json::from_slice::<serde_json::Value>(pre).unwrap())
                .unwrap();
        assert_eq!(
            read(&pretty, |_, _| at).unwrap(),
            events,
            "one payload over several lines"
        );
        let e = read(br#"{"session_id":"s","tool_name":"Bash"}"#, |_, _| at).unwrap_err();
        assert!(
            e.contains("request:1") && e.contains("hook_event_name"),
            "{e}"
        );
        assert!(read(b"not json", |_, _| at)
            .unwrap_err()
            .contains("not JSON"));
        assert!(read(b" \n", |_, _| at).unwrap_err().contains("empty"));
        // A lone surrogate (an output cut in the middle of an emoji) is valid JSON, on one line
        // or several.
        let cut = b"{\"session_id\":\"s\",\n \"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Bash\",\n \"tool_input\":{\"command\":\"echo \\ud83d\"},\"tool_use_id\":\"toolu_2\"}";
        for body in [
            &cut[..],
            &cut.iter()
                .map(|&b| if b == b'\n' { b' ' } else { b })
                .collect::<Vec<u8>>(),
        ] {
            let events = read(body, |_, _| at).unwrap();
            assert_eq!(events.len(), 1, "{}", String::from_utf8_lossy(body));
            let encoded = String::from_utf8(events[0].encode()).unwrap();
            assert!(encoded.contains("echo \u{fffd}"), "{encoded}");
        }
        let quiet = br#"{"session_id":"s","hook_event_name":"Notification","message":"hi"}"#;
        assert!(
            read(quiet, |_, _| at).unwrap().is_empty(),
            "nothing for the ledger"
        );
    }
}

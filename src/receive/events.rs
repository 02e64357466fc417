//! `POST /v1/events`: v1 events as JSON lines (the processor's input format, docs/ARCHITECTURE.md),
//! published as they are. Answered `200 {"accepted": N}`.

use super::state::Shared;
use super::{reading, reply};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::sync::Arc;
use toolcalls_model::Event;

pub const ROUTE: &str = "events";

pub async fn events(State(s): State<Arc<Shared>>, body: Result<Bytes, BytesRejection>) -> Response {
    let body = match reply::body(&s, body) {
        Ok(b) => b,
        Err(r) => return r.into_response(),
    };
    let (events, _turn) = match reading::events(&s.readers, body, read).await {
        Ok(read) => read,
        Err(unread) => return reply::unread(&s, unread),
    };
    match reply::deliver(&s, ROUTE, &events).await {
        Ok(()) => Json(serde_json::json!({ "accepted": events.len() })).into_response(),
        Err(r) => r.into_response(),
    }
}

/// Every line's event, or why some lines are not v1 events.
pub fn read(body: &[u8]) -> Result<Vec<Event>, String> {
    let mut events = Vec::new();
    let mut problems = Vec::new();
    for (i, line) in body.split(|&b| b == b'\n').enumerate() {
        let line = line.trim_ascii();
        if line.is_empty() {
            continue;
        }
        match Event::decode(line) {
            Ok(e) => events.push(e),
            Err(e) => problems.push(format!("line {}: {e}", i + 1)),
        }
    }
    if !problems.is_empty() {
        return Err(reply::reasons(&problems));
    }
    if events.is_empty() {
        return Err("the body holds no event; expected v1 events, one JSON object per line".into());
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_line_must_be_an_event() {
        let ok = r#"{"v":1,"kind":"announce","source":"t","session":"s","callId":"c1","time":"2026-01-01T00:00:00Z","tool":"ls"}"#;
        assert_eq!(
            super::read(format!("{ok}\n\n{ok}\r\n").as_bytes())
                .unwrap()
                .len(),
            2
        );
        let e = super::read(format!("{ok}\n{{\"v\":1}}\n").as_bytes()).unwrap_err();
        assert!(e.starts_with("line 2: "), "{e}");
        assert!(super::read(b"\n").unwrap_err().contains("no event"));
    }
}

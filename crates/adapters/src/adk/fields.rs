//! Reading one @nhtio/adk bus event: which event a line holds (wrapped or bare), and its fields,
//! each with the error that says what is wrong with it.
//!
//! Values are kept as their JSON text ([`Obj`]) until a field is read, so that arguments and
//! results reach the event verbatim — including what JavaScript's `JSON.stringify` writes and a
//! `serde_json::Value` cannot hold (a lone surrogate `\ud800` in a string, which the ADK hashes).

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::Value;
use toolcalls_model::{Checksum, Json, Timestamp};

use crate::common::{excerpt, loose_time};

/// A JSON object whose values are kept as text.
pub(super) type Obj = BTreeMap<String, Box<RawValue>>;

/// The bus events this adapter reads, by the names the ADK's emitters give them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Functional bus `toolCall`: a `TurnToolCallContent`.
    ToolCall,
    /// Observability bus `toolExecutionStart`: a `ToolExecutionStartEvent`.
    ExecStart,
    /// Observability bus `toolExecutionEnd`: a `ToolExecutionEndEvent`.
    ExecEnd,
    /// Observability bus `turnStart`: a `TurnStartEvent`.
    TurnStart,
    /// Observability bus `turnEnd`: a `TurnEndEvent`.
    TurnEnd,
    /// Another event of the buses (`message`, `thought`, `dispatchStart`, `log`, …): nothing for
    /// the ledger.
    Other,
}

impl Kind {
    /// The event an emitter names `name` (`runner.on(name, …)` / `runner.observe(name, …)`);
    /// `None` for a name the ADK's buses do not have.
    pub(super) fn named(name: &str) -> Option<Kind> {
        Some(match name {
            "toolCall" => Kind::ToolCall,
            "toolExecutionStart" => Kind::ExecStart,
            "toolExecutionEnd" => Kind::ExecEnd,
            "turnStart" => Kind::TurnStart,
            "turnEnd" => Kind::TurnEnd,
            // The rest of `TurnEvents` / `TurnObservabilityEvents` (`src/lib/types/turn_runner.ts`)
            // and of the dispatch runner's observers (`src/lib/types/dispatch_runner.ts`).
            "message" | "thought" | "turnGateOpen" | "turnGateClosed" | "dispatchStart"
            | "dispatchEnd" | "iterationStart" | "iterationEnd" | "generationStats" | "log"
            | "error" | "warning" => Kind::Other,
            _ => return None,
        })
    }

    /// Whether `name` is an event of the ledger (a tool call, an execution, a turn boundary).
    pub(super) fn of_ledger(name: &str) -> bool {
        Kind::named(name).is_some_and(|k| k != Kind::Other)
    }

    /// The bus name, for error messages.
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::ToolCall => "toolCall",
            Kind::ExecStart => "toolExecutionStart",
            Kind::ExecEnd => "toolExecutionEnd",
            Kind::TurnStart => "turnStart",
            Kind::TurnEnd => "turnEnd",
            Kind::Other => "event",
        }
    }
}

/// The keys that name a wrapped event and hold its payload.
pub(super) const NAME_KEYS: [&str; 2] = ["event", "type"];
pub(super) const PAYLOAD_KEYS: [&str; 2] = ["payload", "data"];

/// Which event a bare payload is, by its keys (`None`: no payload of the ADK's buses).
pub(super) fn payload_kind(has: impl Fn(&str) -> bool) -> Option<Kind> {
    if has("id") && has("isComplete") && (has("tool") || has("checksum")) {
        return Some(Kind::ToolCall);
    }
    if has("toolName") && has("callId") {
        return Some(if has("endedAt") {
            Kind::ExecEnd
        } else {
            Kind::ExecStart
        });
    }
    if has("aDelta") || has("dispatchId") || has("gateId") {
        // Message and thought chunks, dispatch / iteration / log events, gates.
        return Some(Kind::Other);
    }
    if has("turnId") && has("endedAt") {
        return Some(Kind::TurnEnd);
    }
    if has("turnId") && has("startedAt") {
        return Some(Kind::TurnStart);
    }
    None
}

/// Whether a parsed line is an ADK bus event of the ledger (for format detection): a wrapped
/// `toolCall` / `toolExecution*` / `turn*` event, or one of those payloads bare.
pub(crate) fn looks_like(v: &Value) -> bool {
    let Some(o) = v.as_object() else {
        return false;
    };
    let wrapped = NAME_KEYS
        .iter()
        .filter_map(|k| o.get(*k).and_then(Value::as_str))
        .any(Kind::of_ledger)
        && PAYLOAD_KEYS
            .iter()
            .any(|k| o.get(*k).is_some_and(Value::is_object));
    if wrapped {
        return true;
    }
    let has = |k: &str| o.contains_key(k);
    match payload_kind(has) {
        Some(Kind::ToolCall) => has("createdAt"),
        Some(Kind::ExecStart | Kind::ExecEnd) => has("startedAt"),
        // A bare turn event has nothing but its own keys.
        Some(Kind::TurnStart | Kind::TurnEnd) => o.keys().all(|k| {
            matches!(
                k.as_str(),
                "turnId" | "startedAt" | "endedAt" | "durationMs"
            )
        }),
        Some(Kind::Other) | None => false,
    }
}

/// Reads a JSON object, values kept as text.
pub(super) fn object(text: &str) -> Result<Obj, serde_json::Error> {
    serde_json::from_str(text)
}

fn present<'o>(o: &'o Obj, key: &str) -> Option<&'o str> {
    o.get(key).map(|raw| raw.get()).filter(|t| *t != "null")
}

/// A string field; absent or `null` is `None`.
pub(super) fn string(o: &Obj, key: &str) -> Result<Option<String>, String> {
    let Some(text) = present(o, key) else {
        return Ok(None);
    };
    serde_json::from_str::<String>(text)
        .map(Some)
        .map_err(|_| format!("`{key}` must be a string, got `{}`", excerpt(text)))
}

/// A string field that is not blank.
pub(super) fn name(o: &Obj, key: &str) -> Result<Option<String>, String> {
    Ok(string(o, key)?.filter(|s| !s.trim().is_empty()))
}

/// A boolean field.
pub(super) fn boolean(o: &Obj, key: &str) -> Result<Option<bool>, String> {
    let Some(text) = present(o, key) else {
        return Ok(None);
    };
    match text {
        "true" => Ok(Some(true)),
        "false" => Ok(Some(false)),
        _ => Err(format!(
            "`{key}` must be true or false, got `{}`",
            excerpt(text)
        )),
    }
}

/// A time: luxon's `DateTime` writes itself as ISO 8601 with an offset
/// (`2026-05-04T10:15:00.120+02:00`, its `toJSON`); epoch milliseconds are taken too. `null`
/// (what an invalid `DateTime` writes) and absent are `None`.
pub(super) fn time(o: &Obj, key: &str) -> Result<Option<Timestamp>, String> {
    let Some(text) = present(o, key) else {
        return Ok(None);
    };
    serde_json::from_str::<Value>(text)
        .ok()
        .as_ref()
        .and_then(loose_time)
        .map(Some)
        .ok_or_else(|| {
            format!(
                "`{key}` is not a time (an ISO 8601 string as luxon writes it, or epoch milliseconds): `{}`",
                excerpt(text)
            )
        })
}

/// A duration in milliseconds (luxon's `diff(...).milliseconds`, which may have a fraction).
pub(super) fn millis(o: &Obj, key: &str) -> Result<Option<u64>, String> {
    let Some(text) = present(o, key) else {
        return Ok(None);
    };
    match serde_json::from_str::<f64>(text) {
        Ok(ms) if ms.is_finite() && ms >= 0.0 => Ok(Some(ms.round() as u64)),
        _ => Err(format!(
            "`{key}` must be a number of milliseconds (0 or more), got `{}`",
            excerpt(text)
        )),
    }
}

/// A JSON value kept verbatim. `null` is a value here (the ADK hashes `"args":null`); only an
/// absent key is `None`.
pub(super) fn json(o: &Obj, key: &str) -> Result<Option<Json>, String> {
    match o.get(key) {
        None => Ok(None),
        Some(raw) => Json::parse(raw.get())
            .map(Some)
            .map_err(|e| format!("`{key}` cannot be kept ({e})")),
    }
}

/// A checksum field: 64 lowercase hex digits, as the ADK prints `sha256(...)`. Absent, `null`
/// and `""` (what `reportToolCall` sends until both tool and args are known) are `None`.
pub(super) fn checksum(o: &Obj, key: &str) -> Result<Option<Checksum>, String> {
    match string(o, key)? {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => Checksum::parse(&s).map(Some).map_err(|e| {
            format!(
                "`{key}` is not an ADK tool-call checksum ({e}): `{}`",
                excerpt(&s)
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(text: &str) -> Obj {
        object(text).unwrap()
    }

    #[test]
    fn fields_read_or_say_what_is_wrong() {
        let o = obj(
            r#"{"s":"x","b":true,"n":12.6,"t":"2026-05-04T10:15:00.120+02:00","z":null,"bad":1}"#,
        );
        assert_eq!(string(&o, "s").unwrap().as_deref(), Some("x"));
        assert_eq!(string(&o, "z").unwrap(), None);
        assert!(string(&o, "bad")
            .unwrap_err()
            .contains("`bad` must be a string"));
        assert_eq!(boolean(&o, "b").unwrap(), Some(true));
        assert!(boolean(&o, "s").unwrap_err().contains("true or false"));
        assert_eq!(millis(&o, "n").unwrap(), Some(13));
        assert_eq!(
            time(&o, "t").unwrap().unwrap().to_rfc3339(),
            "2026-05-04T08:15:00.120Z"
        );
        assert!(time(&o, "s").unwrap_err().contains("not a time"));
        assert_eq!(json(&o, "z").unwrap().unwrap().as_str(), "null");
        assert_eq!(json(&o, "nope").unwrap(), None);
        let c = obj(r#"{"a":"","b":"ABC"}"#);
        assert_eq!(checksum(&c, "a").unwrap(), None);
        assert!(checksum(&c, "b")
            .unwrap_err()
            .contains("not an ADK tool-call checksum"));
    }

    #[test]
    fn arguments_javascript_writes_are_kept_verbatim() {
        let o = obj(r#"{"args":{"q":"\ud800","n":1e400}}"#);
        assert_eq!(
            json(&o, "args").unwrap().unwrap().as_str(),
            r#"{"q":"\ud800","n":1e400}"#
        );
    }

    #[test]
    fn detection_needs_an_event_of_the_ledger() {
        assert!(looks_like(
            &json!({"event": "toolCall", "payload": {"id": "c"}})
        ));
        assert!(looks_like(&json!({"type": "turnEnd", "data": {}})));
        assert!(!looks_like(&json!({"event": "message", "payload": {}})));
        assert!(!looks_like(&json!({"type": "session_meta", "payload": {}})));
        assert!(!looks_like(&json!({"type": "toolCall"})));
        assert!(looks_like(&json!({
            "id": "c", "tool": "t", "args": {}, "checksum": "", "createdAt": "x",
            "updatedAt": "x", "isComplete": false, "isError": false
        })));
        assert!(looks_like(
            &json!({"toolName": "t", "turnId": "u", "callId": "", "args": {}, "startedAt": "x"})
        ));
        assert!(looks_like(&json!({"turnId": "u", "startedAt": "x"})));
        assert!(!looks_like(
            &json!({"turnId": "u", "startedAt": "x", "user": 1})
        ));
        assert!(!looks_like(&json!({"id": "c", "isComplete": true})));
    }
}

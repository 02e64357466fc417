//! A published record as an OpenTelemetry span, after the GenAI semantic conventions for tool
//! execution (`execute_tool {tool}`), with the OpenInference attributes Phoenix shows.
//!
//! Ids are derived, never random, so that exporting a record again (after a restart replays a
//! batch that was committed but whose spans were not yet sent) yields the same span:
//! - the trace is the session's: `sha256("toolcalls trace" ‖ source ‖ 0 ‖ session)[..16]`, or the
//!   agent's own when the record's attributes carry a W3C `traceparent`, the span then being a
//!   child of the span it names;
//! - the span id is `sha256("toolcalls span" ‖ record id ‖ revision)[..8]`.

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use toolcalls_model::{Phase, Timestamp, ToolCallRecord};

/// What converts records in the partition tasks.
#[derive(Clone)]
pub struct SpanMaker {
    scope: InstrumentationScope,
}

impl Default for SpanMaker {
    fn default() -> Self {
        SpanMaker {
            scope: InstrumentationScope::builder("toolcalls")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        }
    }
}

impl SpanMaker {
    pub fn span(
        &self,
        record: &toolcalls_model::ToolCallRecord,
    ) -> opentelemetry_sdk::trace::SpanData {
        span_of(record, &self.scope)
    }
}

/// The span name's operation, and `gen_ai.operation.name`.
pub const OPERATION: &str = "execute_tool";

/// The span of `record` (already redacted: nothing here reads the original arguments).
pub fn span_of(record: &ToolCallRecord, scope: &InstrumentationScope) -> SpanData {
    let meta = &record.metadata;
    let tool = record.spec.tool_ref.as_ref().map(|r| r.name.as_str());
    let (trace_id, parent) = match parent_of(record) {
        Some((trace, span)) => (trace, span),
        None => (
            session_trace(meta.source.as_str(), meta.session.as_str()),
            SpanId::INVALID,
        ),
    };
    let start = record.status.started_at.unwrap_or(record.created_at);
    let end = record
        .status
        .completed_at
        .unwrap_or(record.updated_at)
        .max(start);

    let mut attributes = Vec::with_capacity(20);
    let mut add = |k: &'static str, v: Value| attributes.push(KeyValue::new(k, v));
    add("gen_ai.operation.name", OPERATION.into());
    if let Some(tool) = tool {
        add("gen_ai.tool.name", tool.to_owned().into());
        add("tool.name", tool.to_owned().into());
    }
    if let Some(id) = &record.stream_id {
        add("gen_ai.tool.call.id", id.as_str().to_owned().into());
    }
    add(
        "gen_ai.conversation.id",
        meta.session.as_str().to_owned().into(),
    );
    add("session.id", meta.session.as_str().to_owned().into());
    if let Some(input) = &record.spec.input {
        add(
            "gen_ai.tool.call.arguments",
            input.as_str().to_owned().into(),
        );
        add("input.value", input.as_str().to_owned().into());
        add("input.mime_type", "application/json".into());
    }
    if let Some(output) = &record.status.output {
        add("gen_ai.tool.call.result", output.as_str().to_owned().into());
        add("output.value", output.as_str().to_owned().into());
        add("output.mime_type", "application/json".into());
    }
    add("openinference.span.kind", "TOOL".into());
    add("toolcalls.record.id", meta.name.to_string().into());
    add("toolcalls.record.revision", i64::from(meta.revision).into());
    add("toolcalls.source", meta.source.as_str().to_owned().into());
    if let Some(thread) = &meta.thread {
        add("toolcalls.thread", thread.as_str().to_owned().into());
    }
    if let Some(turn) = &meta.turn {
        add("toolcalls.turn", turn.as_str().to_owned().into());
    }
    add("toolcalls.phase", record.status.phase.as_str().into());
    if let Some(checksum) = &record.checksum {
        add("toolcalls.checksum", checksum.to_string().into());
    }
    let c = &record.correlation;
    add("toolcalls.correlation.strategy", c.strategy.as_str().into());
    add("toolcalls.correlation.confidence", c.confidence.into());
    if !record.redacted.is_empty() {
        let paths = record.redacted.iter().cloned().map(StringValue::from);
        add(
            "toolcalls.redacted",
            Value::Array(paths.collect::<Vec<_>>().into()),
        );
    }
    let status = match failure(record) {
        Some((error_type, description)) => {
            add("error.type", error_type.into());
            Status::Error {
                description: description.into(),
            }
        }
        None => Status::Unset,
    };

    SpanData {
        span_context: SpanContext::new(
            trace_id,
            record_span(record),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: parent,
        parent_span_is_remote: parent != SpanId::INVALID,
        span_kind: SpanKind::Internal,
        name: match tool {
            Some(tool) => Cow::Owned(format!("{OPERATION} {tool}")),
            None => Cow::Borrowed(OPERATION),
        },
        start_time: system_time(start),
        end_time: system_time(end),
        attributes,
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status,
        instrumentation_scope: scope.clone(),
    }
}

/// `error.type` and the status description of a call that did not succeed: the phase (`Failed`,
/// `TimedOut`, …), and why when the record says.
fn failure(record: &ToolCallRecord) -> Option<(&'static str, String)> {
    let phase = record.status.phase;
    if phase == Phase::Succeeded && !record.status.is_error {
        return None;
    }
    let error_type = if phase == Phase::Succeeded {
        Phase::Failed.as_str()
    } else {
        phase.as_str()
    };
    let description = match &record.status.reason {
        Some(reason) => format!("{error_type}: {reason}"),
        None => error_type.to_owned(),
    };
    Some((error_type, description))
}

/// The trace every record of a session belongs to when its events carry no trace context.
pub fn session_trace(source: &str, session: &str) -> TraceId {
    let mut h = Sha256::new();
    h.update(b"toolcalls trace");
    h.update(source.as_bytes());
    h.update([0]);
    h.update(session.as_bytes());
    let digest = h.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    bytes[0] |= 1; // never the invalid (all-zero) id
    TraceId::from_bytes(bytes)
}

fn record_span(record: &ToolCallRecord) -> SpanId {
    let mut h = Sha256::new();
    h.update(b"toolcalls span");
    h.update(record.metadata.name.0.as_bytes());
    h.update(record.metadata.revision.to_be_bytes());
    let digest = h.finalize();
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    bytes[0] |= 1;
    SpanId::from_bytes(bytes)
}

/// The agent's trace and span from a W3C `traceparent` attribute
/// (`00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`), when the record carries a valid one.
fn parent_of(record: &ToolCallRecord) -> Option<(TraceId, SpanId)> {
    let value = record.attributes.as_ref()?.get("traceparent")?.as_str()?;
    parse_traceparent(value)
}

pub(crate) fn parse_traceparent(value: &str) -> Option<(TraceId, SpanId)> {
    let mut parts = value.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex(version, 2) || version == "ff" || !hex(trace, 32) || !hex(span, 16) || !hex(flags, 2) {
        return None;
    }
    if version == "00" && parts.next().is_some() {
        return None;
    }
    let trace = TraceId::from_hex(trace).ok()?;
    let span = SpanId::from_hex(span).ok()?;
    (trace != TraceId::INVALID && span != SpanId::INVALID).then_some((trace, span))
}

/// A record time as a `SystemTime` (times before 1970 included).
fn system_time(t: Timestamp) -> SystemTime {
    let ms = t.millis();
    let offset = Duration::from_millis(ms.unsigned_abs());
    if ms >= 0 {
        UNIX_EPOCH + offset
    } else {
        UNIX_EPOCH.checked_sub(offset).unwrap_or(UNIX_EPOCH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(json: serde_json::Value) -> ToolCallRecord {
        serde_json::from_value(json).unwrap()
    }

    fn base() -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "toolcalls.dev/v1", "kind": "ToolCall",
            "metadata": {"name": "0b9f1f6e-3a55-5c4e-9a0a-0d9f8f2b7c11", "revision": 1,
                         "source": "claude-code", "session": "s1"},
            "streamId": "toolu_01",
            "createdAt": "2026-05-10T10:35:00.000Z", "updatedAt": "2026-05-10T10:35:02.500Z",
            "spec": {"toolRef": {"name": "Bash"}, "input": {"command": "ls"}},
            "status": {"phase": "Succeeded", "startedAt": "2026-05-10T10:35:00.100Z",
                       "completedAt": "2026-05-10T10:35:02.500Z", "output": "a\nb"},
            "correlation": {"strategy": "call_id", "confidence": 1.0, "candidates": 1,
                            "eventsMerged": 2, "duplicates": 0, "attempts": 1, "key": "toolu_01"},
            "replay": "free"
        })
    }

    fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
        span.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| &kv.value)
    }

    #[test]
    fn a_succeeded_call_is_an_execute_tool_span_of_its_session_trace() {
        let scope = InstrumentationScope::builder("toolcalls").build();
        let span = span_of(&record(base()), &scope);
        assert_eq!(span.name, "execute_tool Bash");
        assert_eq!(span.span_kind, SpanKind::Internal);
        assert_eq!(span.status, Status::Unset);
        assert_eq!(
            attr(&span, "gen_ai.operation.name"),
            Some(&"execute_tool".into())
        );
        assert_eq!(attr(&span, "gen_ai.tool.name"), Some(&"Bash".into()));
        assert_eq!(attr(&span, "gen_ai.tool.call.id"), Some(&"toolu_01".into()));
        assert_eq!(
            attr(&span, "gen_ai.tool.call.arguments"),
            Some(&r#"{"command":"ls"}"#.into())
        );
        assert_eq!(
            attr(&span, "gen_ai.tool.call.result"),
            Some(&r#""a\nb""#.into())
        );
        assert_eq!(
            span.span_context.trace_id(),
            session_trace("claude-code", "s1")
        );
        assert_ne!(
            span.span_context.trace_id(),
            session_trace("claude-code", "s2"),
            "sessions are traces of their own"
        );
        assert_eq!(span.parent_span_id, SpanId::INVALID);
        let ms = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap().as_millis();
        assert_eq!(ms(span.end_time) - ms(span.start_time), 2400);
        assert_eq!(
            span_of(&record(base()), &scope).span_context.span_id(),
            span.span_context.span_id(),
            "the same record is the same span"
        );
    }

    #[test]
    fn failures_carry_an_error_status_and_type() {
        let scope = InstrumentationScope::builder("toolcalls").build();
        let mut r = base();
        r["status"]["phase"] = "TimedOut".into();
        r["status"]["reason"] = "no result within 10m".into();
        r["metadata"]["revision"] = 2.into();
        let timed_out = span_of(&record(r), &scope);
        assert_eq!(
            timed_out.status,
            Status::error("TimedOut: no result within 10m")
        );
        assert_eq!(attr(&timed_out, "error.type"), Some(&"TimedOut".into()));
        let first = span_of(&record(base()), &scope);
        assert_ne!(
            timed_out.span_context.span_id(),
            first.span_context.span_id(),
            "a revision is a span of its own"
        );
        let mut r = base();
        r["status"]["isError"] = true.into();
        let failed = span_of(&record(r), &scope);
        assert_eq!(attr(&failed, "error.type"), Some(&"Failed".into()));
    }

    #[test]
    fn a_traceparent_joins_the_agents_trace() {
        let scope = InstrumentationScope::builder("toolcalls").build();
        let mut r = base();
        r["attributes"] = serde_json::json!({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"});
        let span = span_of(&record(r), &scope);
        assert_eq!(
            span.span_context.trace_id(),
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap()
        );
        assert_eq!(
            span.parent_span_id,
            SpanId::from_hex("00f067aa0ba902b7").unwrap()
        );
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad}");
        }
    }

    #[test]
    fn times_before_1970_do_not_panic() {
        assert!(system_time(Timestamp::MIN_RFC3339) < UNIX_EPOCH);
        assert_eq!(system_time(Timestamp(0)), UNIX_EPOCH);
    }
}

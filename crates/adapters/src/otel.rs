//! OpenTelemetry GenAI `execute_tool` spans in OTLP JSON.

use crate::raw;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use toolcalls_model::{Completion, EventBody, Timestamp};

use crate::common::{
    announce_as, first_of, hints_as, id_field, is_pretty_document, lines, str_field, text_field,
    ArgsWire, Ctx, Envelope,
};

/// The span attributes this adapter reads. It ignores every other, so an export with only these
/// (and the span fields of [`SPAN_FIELDS`]) reads as the whole export does: the receiver drops
/// the rest before reading, which keeps a large export's memory small.
pub const SPAN_ATTRIBUTES: [&str; 10] = [
    OPERATION,
    TOOL_NAME,
    CALL_ID,
    CONVERSATION,
    SESSION,
    AGENT_NAME,
    AGENT_ID,
    ARGUMENTS,
    RESULT,
    ERROR_TYPE,
];

/// The fields of a span this adapter reads, beside its `attributes`.
pub const SPAN_FIELDS: [&str; 6] = [
    "name",
    "traceId",
    "spanId",
    "startTimeUnixNano",
    "endTimeUnixNano",
    "status",
];

const OPERATION: &str = "gen_ai.operation.name";
const TOOL_NAME: &str = "gen_ai.tool.name";
const CALL_ID: &str = "gen_ai.tool.call.id";
const CONVERSATION: &str = "gen_ai.conversation.id";
const SESSION: &str = "session.id";
const AGENT_NAME: &str = "gen_ai.agent.name";
const AGENT_ID: &str = "gen_ai.agent.id";
const ARGUMENTS: &str = "gen_ai.tool.call.arguments";
const RESULT: &str = "gen_ai.tool.call.result";
const ERROR_TYPE: &str = "error.type";

/// OTLP JSON traces (`{"resourceSpans": [...]}`): one export request per line, as the OpenTelemetry
/// Collector's file exporter writes them, or one document.
///
/// Every span with `gen_ai.operation.name = execute_tool` (or named `execute_tool …`) is one call:
/// an announce at its start and a completion at its end, carrying `startedAt` and `durationMs`.
/// - call id: `gen_ai.tool.call.id` when the instrumentation records it; without it the
///   completion still names the tool and, when `gen_ai.tool.call.arguments` is recorded, the
///   checksum.
/// - tool: `gen_ai.tool.name`; args: `gen_ai.tool.call.arguments`; result:
///   `gen_ai.tool.call.result` (both opt-in in the conventions, often absent).
/// - error: span status `ERROR`, or an `error.type` attribute.
/// - session: `gen_ai.conversation.id`, else `session.id`, else the trace id; turn: the trace id;
///   agent: `gen_ai.agent.name` / `gen_ai.agent.id`.
///
/// Exporters do not write spans in time order, so this adapter sorts its events by event time
/// (announce before completion at equal times).
pub(crate) fn parse(ctx: &mut Ctx, input: &[u8]) {
    read(ctx, input, true);
}

/// Reads `input`; a line a span at a time where `by_span` ([`read_by_span`]), else as one tree.
fn read(ctx: &mut Ctx, input: &[u8], by_span: bool) {
    let mut out: Vec<(Timestamp, usize, Envelope, EventBody)> = Vec::new();
    if is_pretty_document(input) {
        if let Some(doc) = ctx.json_document(input) {
            export(ctx, 1, &doc, &mut out);
        }
    } else {
        for (line, bytes) in lines(input) {
            if by_span && read_by_span(ctx, line, bytes, &mut out) {
                continue;
            }
            if let Some(doc) = ctx.json_line(line, bytes) {
                export(ctx, line, &doc, &mut out);
            }
        }
    }
    out.sort_by_key(|(t, seq, _, _)| (*t, *seq));
    for (_, _, env, body) in out {
        ctx.emit(env, body);
    }
}

/// Reads an export of one line a span at a time: each span becomes a tree, the export never does
/// (a tree of a large export cost hundreds of bytes an attribute, whatever the adapter reads of
/// it). The events and messages are those [`export`] gives from a tree of the line; `false` for
/// a line that is no JSON (or nests past the bound), which [`Ctx::json_line`] then says.
fn read_by_span(
    ctx: &mut Ctx,
    line: usize,
    bytes: &[u8],
    out: &mut Vec<(Timestamp, usize, Envelope, EventBody)>,
) -> bool {
    let Ok(text) = std::str::from_utf8(bytes).map(str::trim) else {
        return false;
    };
    let Ok(doc) = serde_json::from_str::<&RawValue>(text) else {
        return false;
    };
    if toolcalls_model::json::check_depth(text).is_err() {
        return false;
    }
    let fields = raw::object(doc);
    // `{}` is an export of no spans (see `export`).
    if fields.as_ref().is_some_and(Vec::is_empty) {
        ctx.skip();
        return true;
    }
    let resource_spans = fields
        .as_deref()
        .and_then(|f| raw::last(f, "resourceSpans"))
        .and_then(raw::array);
    let Some(resource_spans) = resource_spans else {
        ctx.error(line, NO_SPANS);
        return true;
    };
    for (ri, rs) in resource_spans.iter().enumerate() {
        let rs = raw::object(rs).unwrap_or_default();
        let scopes = raw::last(&rs, "scopeSpans")
            .or_else(|| raw::last(&rs, "instrumentationLibrarySpans"))
            .and_then(raw::array)
            .unwrap_or_default();
        for (si, ss) in scopes.iter().enumerate() {
            let ss = raw::object(ss).unwrap_or_default();
            let spans = raw::last(&ss, "spans")
                .and_then(raw::array)
                .unwrap_or_default();
            for (pi, span) in spans.iter().enumerate() {
                let at = format!("resourceSpans[{ri}].scopeSpans[{si}].spans[{pi}]");
                let span = crate::value::parse(span.get().as_bytes()).unwrap_or(Value::Null);
                span_events(ctx, line, &at, &span, out);
            }
        }
    }
    true
}

const NO_SPANS: &str = "object has no `resourceSpans`; expected an OTLP JSON trace export";

fn export(
    ctx: &mut Ctx,
    line: usize,
    doc: &Value,
    out: &mut Vec<(Timestamp, usize, Envelope, EventBody)>,
) {
    // `{}` is an export of no spans: proto3's JSON leaves out an empty repeated field (the
    // protobuf twin is an empty body).
    if doc.as_object().is_some_and(serde_json::Map::is_empty) {
        ctx.skip();
        return;
    }
    let Some(resource_spans) = doc.get("resourceSpans").and_then(Value::as_array) else {
        ctx.error(line, NO_SPANS);
        return;
    };
    for (ri, rs) in resource_spans.iter().enumerate() {
        let scopes = rs
            .get("scopeSpans")
            .or_else(|| rs.get("instrumentationLibrarySpans"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for (si, ss) in scopes.iter().enumerate() {
            let spans = ss
                .get("spans")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            for (pi, span) in spans.iter().enumerate() {
                let at = format!("resourceSpans[{ri}].scopeSpans[{si}].spans[{pi}]");
                span_events(ctx, line, &at, span, out);
            }
        }
    }
}

fn span_events(
    ctx: &mut Ctx,
    line: usize,
    at: &str,
    span: &Value,
    out: &mut Vec<(Timestamp, usize, Envelope, EventBody)>,
) {
    let attrs = Value::Object(attributes(span.get("attributes")));
    let name = str_field(span, "name").unwrap_or("");
    let op = attrs.get(OPERATION).and_then(Value::as_str);
    if op != Some("execute_tool") && !name.starts_with("execute_tool") {
        ctx.skip();
        return;
    }
    let fields = match Fields::of(span, &attrs) {
        Ok(fields) => fields,
        Err(problem) => {
            ctx.error_at(line, at, format!("{problem}; skipped"));
            return;
        }
    };
    let tool = fields
        .tool
        .or_else(|| name.strip_prefix("execute_tool ").map(str::trim))
        .filter(|t| !t.is_empty());
    let Some(tool) = tool else {
        ctx.error_at(line, at, "execute_tool span names no tool (no `gen_ai.tool.name`, no `execute_tool <tool>` span name); skipped");
        return;
    };
    let (Some(start), Some(end)) = (
        nanos(span.get("startTimeUnixNano")),
        nanos(span.get("endTimeUnixNano")),
    ) else {
        ctx.error_at(
            line,
            at,
            "span has no valid `startTimeUnixNano` / `endTimeUnixNano`; skipped",
        );
        return;
    };
    let end = end.max(start);
    let trace = fields.trace.map(str::to_owned);
    let session = fields.session.or_else(|| trace.clone());
    let call_id = fields.call_id;
    let args = attrs.get(ARGUMENTS).cloned();
    let status = span.get("status").and_then(|s| s.get("code"));
    let is_error = matches!(status, Some(Value::Number(n)) if n.as_u64() == Some(2))
        || status.and_then(Value::as_str) == Some("STATUS_CODE_ERROR")
        || attrs.get(ERROR_TYPE).is_some();
    let mut span_attrs = Map::new();
    if let Some(id) = span.get("spanId") {
        span_attrs.insert("spanId".into(), id.clone());
    }
    // The span's W3C trace context: the processor's span of the record joins the agent's trace
    // as a child of this span (`--otlp-endpoint`).
    if let (Some(trace), Some(span_id)) = (trace.as_deref(), fields.span) {
        let hex = |s: &str, n| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
        if hex(trace, 32) && hex(span_id, 16) {
            let parent = format!(
                "00-{}-{}-01",
                trace.to_ascii_lowercase(),
                span_id.to_ascii_lowercase()
            );
            span_attrs.insert("traceparent".into(), Value::String(parent));
        }
    }
    let env = Envelope {
        session,
        turn: trace,
        call_id,
        attributes: Some(span_attrs),
        ..Envelope::default()
    };
    // The conventions record structured arguments as JSON text.
    let mut a = announce_as(tool, args.clone(), ArgsWire::Encoded);
    a.agent = fields.agent;
    let result = attrs.get(RESULT).cloned().or_else(|| {
        is_error.then(|| {
            span.get("status")
                .and_then(|s| s.get("message"))
                .cloned()
                .unwrap_or(Value::Null)
        })
    });
    let c = Completion {
        result: (result.filter(|r| !r.is_null())).map(toolcalls_model::Json::from),
        is_error,
        started_at: Some(start),
        duration_ms: Some(end.millis_since(start)),
        ..hints_as(Some(tool), args, ArgsWire::Encoded)
    };
    let seq = out.len();
    out.push((
        start,
        seq,
        Envelope {
            time: start,
            ..env.clone()
        },
        EventBody::Announce(a),
    ));
    out.push((
        end,
        seq + 1,
        Envelope { time: end, ..env },
        EventBody::Completion(c),
    ));
}

/// What an `execute_tool` span's call is known by. An id may be an integer attribute; it is read
/// as its decimal text.
struct Fields<'s> {
    tool: Option<&'s str>,
    trace: Option<&'s str>,
    span: Option<&'s str>,
    session: Option<String>,
    call_id: Option<String>,
    agent: Option<String>,
}

impl<'s> Fields<'s> {
    /// The fields, or the one of them that holds a value of the wrong type.
    fn of(span: &'s Value, attrs: &'s Value) -> Result<Fields<'s>, String> {
        Ok(Fields {
            tool: text_field(attrs, TOOL_NAME)?,
            trace: text_field(span, "traceId")?,
            span: text_field(span, "spanId")?,
            session: first_of(attrs, &[CONVERSATION, SESSION], id_field)?,
            call_id: id_field(attrs, CALL_ID)?,
            agent: first_of(attrs, &[AGENT_NAME, AGENT_ID], id_field)?,
        })
    }
}

/// OTLP `KeyValue` list → map of plain JSON values.
fn attributes(list: Option<&Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for kv in list
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
    {
        if let (Some(k), Some(v)) = (str_field(kv, "key"), kv.get("value")) {
            out.insert(k.to_owned(), any_value(v));
        }
    }
    out
}

/// OTLP `AnyValue` → plain JSON.
fn any_value(v: &Value) -> Value {
    if let Some(s) = v.get("stringValue") {
        return s.clone();
    }
    if let Some(b) = v.get("boolValue") {
        return b.clone();
    }
    if let Some(i) = v.get("intValue") {
        // int64 travels as a string in OTLP JSON.
        return match i {
            Value::String(s) => s.parse::<i64>().map_or_else(|_| i.clone(), Value::from),
            other => other.clone(),
        };
    }
    if let Some(d) = v.get("doubleValue") {
        return d.clone();
    }
    if let Some(items) = v
        .get("arrayValue")
        .and_then(|a| a.get("values"))
        .and_then(Value::as_array)
    {
        return Value::Array(items.iter().map(any_value).collect());
    }
    if let Some(kv) = v.get("kvlistValue") {
        return Value::Object(attributes(kv.get("values")));
    }
    if let Some(b) = v.get("bytesValue") {
        return b.clone();
    }
    Value::Null
}

/// Nanoseconds since the epoch (a decimal string in OTLP JSON, sometimes a number) → timestamp.
fn nanos(v: Option<&Value>) -> Option<Timestamp> {
    let n: i128 = match v? {
        Value::String(s) => s.parse().ok()?,
        Value::Number(n) => i128::from(n.as_u64()?),
        _ => return None,
    };
    if n <= 0 {
        return None;
    }
    i64::try_from(n / 1_000_000)
        .ok()
        .and_then(Timestamp::from_millis_checked)
}

#[cfg(test)]
mod tests {
    use crate::test_support::parse_str;
    use crate::Format;
    use toolcalls_model::{EventBody, EventKind};

    /// The events and messages of `input`, read a span at a time or as one tree a line.
    fn read(input: &str, by_span: bool) -> (Vec<toolcalls_model::Event>, Vec<String>, usize) {
        let options = crate::Options::default();
        let mut ctx = crate::common::Ctx::new(Format::Otel, "t.jsonl", &options);
        super::read(&mut ctx, input.as_bytes(), by_span);
        let p = ctx.finish();
        let said = p.errors.iter().map(ToString::to_string).collect();
        (p.events, said, p.skipped)
    }

    /// Read a span at a time, an export gives what a tree of it gives: the sample, and exports
    /// of odd shapes (elements that are no objects, fields given twice, the older
    /// `instrumentationLibrarySpans`, values a tree cannot hold, fields of the wrong type, no
    /// export at all).
    #[test]
    fn a_span_at_a_time_reads_as_the_whole_tree() {
        let sample = include_str!("../tests/data/otel-genai-spans.jsonl");
        let span = |extra: &str| {
            format!(
                r#"{{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"execute_tool t","startTimeUnixNano":"1775044801010000000","endTimeUnixNano":"1775044801300000000","attributes":[{{"key":"gen_ai.operation.name","value":{{"stringValue":"execute_tool"}}}},{{"key":"gen_ai.tool.call.id","value":{{"stringValue":"c1"}}}},{{"key":"gen_ai.tool.call.id","value":{{"stringValue":"c2"}}}},{{"key":"session.id","value":{{"stringValue":"s \ud83d"}}}},{{"key":"gen_ai.tool.call.arguments","value":{{"stringValue":"{{\"n\":1e400}}"}}}},{{"key":"junk","value":{{"doubleValue":1e400}}}}]{extra}}}"#
            )
        };
        let odd = [
            format!(
                r#"{{"resourceSpans":[{{"resource":{{"attributes":[]}},"scopeSpans":[{{"spans":[{},{},7,{}]}}]}},null,{{"instrumentationLibrarySpans":[{{"spans":[{}]}}]}},{{"scopeSpans":null,"instrumentationLibrarySpans":[{{"spans":[{}]}}]}}],"resourceSpans2":1}}"#,
                span(""),
                span(r#","status":{"code":2},"status":{"code":"STATUS_CODE_ERROR","message":"m"}"#),
                span(r#","traceId":17"#),
                span(r#","name":"other"}"#).trim_end_matches('}').to_owned() + "}",
                span(r#","startTimeUnixNano":"x""#),
            ),
            format!(
                r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{}]}}]}}],"resourceSpans":[]}}"#,
                span("")
            ),
            format!(r#"{{"resourceSpans":{{"a":1}},"x":[{}]}}"#, span("")),
            "[1,2,3]".to_owned(),
            "{}".to_owned(),
            r#"{"resourceSpans":[{"scopeSpans":"none"}]}"#.to_owned(),
            "not json".to_owned(),
        ];
        let inputs = std::iter::once(sample.to_owned()).chain(odd);
        for input in inputs {
            let (by_span, by_tree) = (read(&input, true), read(&input, false));
            assert_eq!(by_span, by_tree, "{input}");
        }
    }

    use crate::fuzz_support as support;

    /// The same, on the sample's exports mutated (`TOOLCALLS_FUZZ_CASES` / `_SECS` / `_SEED` as
    /// for every fuzz test).
    #[test]
    fn mutated_exports_read_the_same_a_span_at_a_time() {
        let sample = include_str!("../tests/data/otel-genai-spans.jsonl");
        let corpus: Vec<Vec<u8>> = sample.lines().map(|l| l.as_bytes().to_vec()).collect();
        let odd = support::odd_values();
        let budget = support::Budget::from_env(300);
        support::run(
            "otel-by-span",
            &budget,
            |rng, _| {
                let base = rng.pick(&corpus).clone();
                support::mutate(rng, &base, &corpus, &odd)
            },
            |input| {
                let input = String::from_utf8_lossy(input);
                assert_eq!(read(&input, true), read(&input, false), "{input}");
            },
        );
    }

    #[test]
    fn events_carry_their_spans_trace_context() {
        let s = include_str!("../tests/data/otel-genai-spans.jsonl");
        let p = parse_str(Format::Otel, "otel-genai-spans.jsonl", s);
        let traceparent = |e: &toolcalls_model::Event| {
            e.attributes
                .as_ref()
                .and_then(|a| a.get("traceparent"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        };
        let first = p
            .events
            .iter()
            .find(|e| traceparent(e).is_some_and(|t| t.contains("eee19b7ec3c1b174")))
            .expect("the span's event");
        assert_eq!(
            traceparent(first).unwrap(),
            "00-5b8efff798038103d269b633813fc60c-eee19b7ec3c1b174-01"
        );
        assert!(p.events.iter().all(|e| traceparent(e).is_some()));
    }

    /// `{}` is a valid export of no spans, as an empty body is in protobuf; an object of other
    /// keys is no export.
    #[test]
    fn an_empty_export_is_no_spans_and_no_error() {
        let p = parse_str(Format::Otel, "spans.jsonl", "{}\n{ }");
        assert!(p.errors.is_empty() && p.events.is_empty(), "{p:?}");
        assert_eq!(p.skipped, 2);
        let p = parse_str(Format::Otel, "spans.jsonl", r#"{"spans":[]}"#);
        assert_eq!(p.errors.len(), 1, "{p:?}");
    }

    /// Attributes set to nothing are read as absent: the events decode from their encoding (the
    /// processor refuses an empty agent, session or call id).
    #[test]
    fn empty_attributes_are_no_values() {
        let span = r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"","spanId":"","name":"execute_tool Bash","startTimeUnixNano":"1775044801000000000","endTimeUnixNano":"1775044801500000000","attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"execute_tool"}},{"key":"gen_ai.agent.name","value":{"stringValue":""}},{"key":"gen_ai.tool.call.id","value":{"stringValue":""}},{"key":"gen_ai.conversation.id","value":{"stringValue":""}}]}]}]}]}"#;
        let p = parse_str(Format::Otel, "spans.jsonl", span);
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert_eq!(p.events.len(), 2);
        for event in &p.events {
            let encoded = event.encode();
            let back = toolcalls_model::Event::decode(&encoded).unwrap_or_else(|e| {
                panic!("{e}: {}", String::from_utf8_lossy(&encoded));
            });
            assert_eq!(&back, event);
            assert!(event.call_id.is_none() && event.turn.is_none());
            if let EventBody::Announce(a) = &event.body {
                assert_eq!(a.agent, None);
            }
        }
    }

    #[test]
    fn execute_tool_spans_become_time_ordered_pairs() {
        let s = include_str!("../tests/data/otel-genai-spans.jsonl");
        let p = parse_str(Format::Otel, "otel-genai-spans.jsonl", s);
        assert_eq!(p.errors.len(), 1, "{:?}", p.errors);
        assert!(p.errors[0].message.contains("names no tool"));
        assert_eq!(p.errors[0].line, 2);
        use EventKind::*;
        let got: Vec<_> = p
            .events
            .iter()
            .map(|e| {
                (
                    e.kind(),
                    e.call_id.as_ref().map(|c| c.0.as_str()),
                    e.time.to_rfc3339(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    Announce,
                    Some("call_w1"),
                    "2026-04-01T12:00:01.000Z".to_owned()
                ),
                (
                    Announce,
                    Some("call_w2"),
                    "2026-04-01T12:00:01.010Z".to_owned()
                ),
                (
                    Completion,
                    Some("call_w2"),
                    "2026-04-01T12:00:01.300Z".to_owned()
                ),
                (
                    Completion,
                    Some("call_w1"),
                    "2026-04-01T12:00:01.750Z".to_owned()
                ),
                (Announce, None, "2026-04-01T12:00:03.000Z".to_owned()),
                (Completion, None, "2026-04-01T12:00:03.120Z".to_owned()),
            ]
        );
        for e in &p.events[..4] {
            assert_eq!(e.session.as_str(), "conv-42");
            assert_eq!(
                e.turn.as_ref().unwrap().as_str(),
                "5b8efff798038103d269b633813fc60c"
            );
        }
        assert_eq!(
            p.events[4].session.as_str(),
            "0af7651916cd43dd8448eb211c80319c",
            "no conversation id: the trace"
        );
        let EventBody::Completion(c) = &p.events[3].body else {
            panic!()
        };
        assert_eq!(c.duration_ms, Some(750));
        assert!(!c.is_error);
        let EventBody::Completion(c) = &p.events[5].body else {
            panic!()
        };
        assert!(c.is_error);
        let EventBody::Announce(a) = &p.events[4].body else {
            panic!()
        };
        assert_eq!(
            c.checksum, a.checksum,
            "no call id, but the checksum links them"
        );
        assert_eq!(a.agent.as_deref(), Some("db-agent"));
        assert_eq!(p.skipped, 2, "the chat span and the invoke_agent span");
    }
}

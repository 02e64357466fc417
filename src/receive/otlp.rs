//! OTLP/HTTP trace bodies → the OTLP JSON the otel adapter reads (`toolcalls_adapters`,
//! `Format::Otel`), one export request on one line.
//!
//! Protobuf bodies are decoded with `opentelemetry-proto`'s prost messages and written in the
//! OTLP JSON encoding (<https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding>): trace
//! and span ids as lowercase hex, 64-bit integers (times, `intValue`) as decimal strings, enums
//! (span kind, status code) as integers, bytes as base64, field names in lowerCamelCase, fields
//! at their default value left out. Span events and links are left out: no adapter reads them.

use base64::Engine as _;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message as _;
use serde_json::{json, Map, Value};

/// A protobuf `ExportTraceServiceRequest` as one line of OTLP JSON.
pub fn protobuf_to_json_line(body: &[u8]) -> Result<Vec<u8>, String> {
    let request = ExportTraceServiceRequest::decode(body).map_err(|e| {
        format!("the body is not an OTLP ExportTraceServiceRequest in protobuf ({e})")
    })?;
    let doc = json!({ "resourceSpans": request.resource_spans.iter().map(resource_spans).collect::<Vec<_>>() });
    Ok(serde_json::to_vec(&doc).expect("a JSON value serializes"))
}

/// An OTLP JSON body (compact or pretty) as one line.
pub fn json_to_json_line(body: &[u8]) -> Result<Vec<u8>, String> {
    let doc: Value = toolcalls_adapters::value::parse(body).map_err(|e| {
        format!("the body is not JSON ({e}); expected an OTLP JSON ExportTraceServiceRequest")
    })?;
    // `{}` is an export of no spans (proto3's JSON leaves an empty repeated field out).
    let empty = doc.as_object().is_some_and(Map::is_empty);
    if !empty && !doc.get("resourceSpans").is_some_and(Value::is_array) {
        return Err(
            "the body has no `resourceSpans` array; expected an OTLP JSON ExportTraceServiceRequest"
                .into(),
        );
    }
    Ok(serde_json::to_vec(&doc).expect("a JSON value serializes"))
}

fn resource_spans(rs: &ResourceSpans) -> Value {
    let mut o = Map::new();
    if let Some(r) = &rs.resource {
        o.insert(
            "resource".into(),
            json!({ "attributes": attributes(&r.attributes) }),
        );
    }
    o.insert(
        "scopeSpans".into(),
        rs.scope_spans.iter().map(scope_spans).collect(),
    );
    put_str(&mut o, "schemaUrl", &rs.schema_url);
    Value::Object(o)
}

fn scope_spans(ss: &ScopeSpans) -> Value {
    let mut o = Map::new();
    if let Some(s) = &ss.scope {
        o.insert("scope".into(), scope(s));
    }
    o.insert("spans".into(), ss.spans.iter().map(span).collect());
    put_str(&mut o, "schemaUrl", &ss.schema_url);
    Value::Object(o)
}

fn scope(s: &InstrumentationScope) -> Value {
    let mut o = Map::new();
    put_str(&mut o, "name", &s.name);
    put_str(&mut o, "version", &s.version);
    if !s.attributes.is_empty() {
        o.insert("attributes".into(), attributes(&s.attributes));
    }
    Value::Object(o)
}

fn span(s: &Span) -> Value {
    let mut o = Map::new();
    put_str(&mut o, "traceId", &hex(&s.trace_id));
    put_str(&mut o, "spanId", &hex(&s.span_id));
    put_str(&mut o, "traceState", &s.trace_state);
    put_str(&mut o, "parentSpanId", &hex(&s.parent_span_id));
    if s.flags != 0 {
        o.insert("flags".into(), s.flags.into());
    }
    put_str(&mut o, "name", &s.name);
    if s.kind != 0 {
        o.insert("kind".into(), s.kind.into());
    }
    if s.start_time_unix_nano != 0 {
        o.insert(
            "startTimeUnixNano".into(),
            s.start_time_unix_nano.to_string().into(),
        );
    }
    if s.end_time_unix_nano != 0 {
        o.insert(
            "endTimeUnixNano".into(),
            s.end_time_unix_nano.to_string().into(),
        );
    }
    if !s.attributes.is_empty() {
        o.insert("attributes".into(), attributes(&s.attributes));
    }
    if let Some(status) = &s.status {
        let mut st = Map::new();
        put_str(&mut st, "message", &status.message);
        if status.code != 0 {
            st.insert("code".into(), status.code.into());
        }
        o.insert("status".into(), Value::Object(st));
    }
    Value::Object(o)
}

fn attributes(list: &[KeyValue]) -> Value {
    list.iter()
        .map(|kv| {
            let value = kv.value.as_ref().map_or_else(|| json!({}), any_value);
            json!({ "key": kv.key, "value": value })
        })
        .collect()
}

fn any_value(v: &AnyValue) -> Value {
    use any_value::Value as V;
    match &v.value {
        Some(V::StringValue(s)) => json!({ "stringValue": s }),
        Some(V::BoolValue(b)) => json!({ "boolValue": b }),
        Some(V::IntValue(i)) => json!({ "intValue": i.to_string() }),
        // Proto3 JSON writes the non-finite doubles as strings.
        Some(V::DoubleValue(d)) if d.is_nan() => json!({ "doubleValue": "NaN" }),
        Some(V::DoubleValue(d)) if d.is_infinite() => {
            json!({ "doubleValue": if *d > 0.0 { "Infinity" } else { "-Infinity" } })
        }
        Some(V::DoubleValue(d)) => json!({ "doubleValue": d }),
        Some(V::ArrayValue(a)) => {
            json!({ "arrayValue": { "values": a.values.iter().map(any_value).collect::<Vec<_>>() } })
        }
        Some(V::KvlistValue(kv)) => json!({ "kvlistValue": { "values": attributes(&kv.values) } }),
        Some(V::BytesValue(b)) => {
            json!({ "bytesValue": base64::engine::general_purpose::STANDARD.encode(b) })
        }
        // A reference into a dictionary that only profiles carry, or no value: empty.
        Some(V::StringValueStrindex(_)) | None => json!({}),
    }
}

fn put_str(o: &mut Map<String, Value>, key: &str, value: &str) {
    if !value.is_empty() {
        o.insert(key.into(), value.into());
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::trace::v1::Status;
    use toolcalls_adapters::{parse, Format, Options};

    fn kv(key: &str, v: any_value::Value) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue { value: Some(v) }),
            ..KeyValue::default()
        }
    }

    /// The otel adapter reads a protobuf export as it reads the same spans in OTLP JSON.
    #[test]
    fn protobuf_reads_as_otlp_json() {
        use any_value::Value::{IntValue, StringValue};
        let span = Span {
            trace_id: (0u8..16).collect(),
            span_id: vec![0xab; 8],
            name: "execute_tool get_weather".into(),
            kind: 1,
            start_time_unix_nano: 1_775_044_801_000_000_000,
            end_time_unix_nano: 1_775_044_801_750_000_000,
            attributes: vec![
                kv("gen_ai.operation.name", StringValue("execute_tool".into())),
                kv("gen_ai.tool.name", StringValue("get_weather".into())),
                kv("gen_ai.tool.call.id", StringValue("call_1".into())),
                kv("gen_ai.conversation.id", StringValue("conv-1".into())),
                kv(
                    "gen_ai.tool.call.arguments",
                    StringValue(r#"{"city":"Paris"}"#.into()),
                ),
                kv("retries", IntValue(3)),
            ],
            status: Some(Status {
                message: "boom".into(),
                code: 2,
            }),
            ..Span::default()
        };
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans: vec![span],
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            }],
        };
        let line = protobuf_to_json_line(&request.encode_to_vec()).unwrap();
        let doc: Value = serde_json::from_slice(&line).unwrap();
        let span = &doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        assert_eq!(span["traceId"], "000102030405060708090a0b0c0d0e0f");
        assert_eq!(span["spanId"], "abababababababab");
        assert_eq!(span["startTimeUnixNano"], "1775044801000000000");
        assert_eq!(span["status"]["code"], 2);
        assert_eq!(span["attributes"][5]["value"]["intValue"], "3");
        let p = parse(Format::Otel, "request", &line, &Options::default());
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert_eq!(p.events.len(), 2);
        let e = &p.events[1];
        assert_eq!(e.session.as_str(), "conv-1");
        assert_eq!(e.call_id.as_ref().unwrap().0, "call_1");
        assert_eq!(
            e.turn.as_ref().unwrap().as_str(),
            "000102030405060708090a0b0c0d0e0f"
        );
        let toolcalls_model::EventBody::Completion(c) = &e.body else {
            panic!("{e:?}")
        };
        assert!(c.is_error && c.checksum.is_some());
        assert_eq!(c.duration_ms, Some(750));
        assert!(protobuf_to_json_line(b"\xff\xff\xff").is_err());
    }

    #[test]
    fn an_empty_export_reads_as_its_protobuf_twin() {
        for body in [&b"{}"[..], b" { } "] {
            let line = json_to_json_line(body).unwrap();
            let events = crate::receive::traces::read(crate::receive::traces::Encoding::Json, body);
            assert_eq!(events.unwrap(), [], "{}", String::from_utf8_lossy(&line));
        }
        let empty = crate::receive::traces::read(crate::receive::traces::Encoding::Protobuf, b"");
        assert_eq!(empty.unwrap(), []);
        assert!(json_to_json_line(br#"{"spans":[]}"#).is_err());
    }

    #[test]
    fn json_bodies_with_lone_surrogates_are_read() {
        // What the Python SDK's JSON exporter writes for a string holding a lone surrogate.
        let body = br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"execute_tool cut \ud83d"}]}]}]}"#;
        let line = json_to_json_line(body).unwrap();
        let doc: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(
            doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["name"],
            "execute_tool cut \u{fffd}"
        );
        assert!(json_to_json_line(br#"{"resourceSpans":[}"#)
            .unwrap_err()
            .contains("not JSON"));
    }
}

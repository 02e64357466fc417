//! OTLP/HTTP trace bodies → the OTLP JSON the otel adapter reads (`toolcalls_adapters`,
//! `Format::Otel`), one export request on one line, holding only what the adapter reads.
//!
//! Protobuf bodies are decoded with `opentelemetry-proto`'s prost messages and written in the
//! OTLP JSON encoding (<https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding>): trace
//! and span ids as lowercase hex, 64-bit integers (times, `intValue`) as decimal strings, enums
//! (status code) as integers, bytes as base64, field names in lowerCamelCase, fields at their
//! default value left out. Of each span only the fields of
//! [`OTEL_SPAN_FIELDS`](toolcalls_adapters::OTEL_SPAN_FIELDS) and the
//! attributes named in [`OTEL_SPAN_ATTRIBUTES`] are written; resources, scopes, span events and
//! links, and every other attribute are left out: the adapter reads none of them, and a tree of
//! them would cost it hundreds of bytes each. JSON bodies: [`super::otlp_json`].

use base64::Engine as _;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message as _;
use toolcalls_adapters::OTEL_SPAN_ATTRIBUTES;

/// A protobuf `ExportTraceServiceRequest` as one line of OTLP JSON, written straight as text: a
/// tree of values per attribute cost about a kilobyte each, so a small compressed body of millions
/// of empty attributes took gigabytes.
/// At most `max_values` attribute values (nested ones too): an empty attribute takes 2 bytes of
/// protobuf and a few hundred bytes once read, so a body of millions of them is refused rather
/// than read.
pub fn protobuf_to_json_line(body: &[u8], max_values: usize) -> Result<Vec<u8>, String> {
    let request = ExportTraceServiceRequest::decode(body).map_err(|e| {
        format!("the body is not an OTLP ExportTraceServiceRequest in protobuf ({e})")
    })?;
    let values = values_in(&request);
    if values > max_values {
        return Err(format!(
            "the export holds {values} attribute values, more than the {max_values} a request may \
             (one per 16 bytes of --max-body-bytes); send smaller batches"
        ));
    }
    let mut out = Vec::with_capacity(body.len() * 2);
    let mut doc = Object::open(&mut out);
    array(
        doc.key("resourceSpans"),
        &request.resource_spans,
        resource_spans,
    );
    doc.close();
    Ok(out)
}

/// How many attribute values the request holds: every key-value pair, and every value of an
/// array, at any depth.
fn values_in(request: &ExportTraceServiceRequest) -> usize {
    fn of_list(list: &[KeyValue]) -> usize {
        list.iter()
            .map(|kv| 1 + kv.value.as_ref().map_or(0, of_value))
            .sum()
    }
    fn of_value(v: &AnyValue) -> usize {
        match &v.value {
            Some(any_value::Value::ArrayValue(a)) => {
                a.values.len() + a.values.iter().map(of_value).sum::<usize>()
            }
            Some(any_value::Value::KvlistValue(kv)) => of_list(&kv.values),
            _ => 0,
        }
    }
    let mut n = 0;
    for rs in &request.resource_spans {
        n += rs.resource.as_ref().map_or(0, |r| of_list(&r.attributes));
        for ss in &rs.scope_spans {
            n += ss.scope.as_ref().map_or(0, |s| of_list(&s.attributes));
            for span in &ss.spans {
                n += of_list(&span.attributes);
                n += span
                    .events
                    .iter()
                    .map(|e| of_list(&e.attributes))
                    .sum::<usize>();
                n += span
                    .links
                    .iter()
                    .map(|l| of_list(&l.attributes))
                    .sum::<usize>();
            }
        }
    }
    n
}

fn resource_spans(out: &mut Vec<u8>, rs: &ResourceSpans) {
    let mut o = Object::open(out);
    array(o.key("scopeSpans"), &rs.scope_spans, scope_spans);
    o.close();
}

fn scope_spans(out: &mut Vec<u8>, ss: &ScopeSpans) {
    let mut o = Object::open(out);
    array(o.key("spans"), &ss.spans, span);
    o.close();
}

/// The fields the adapter reads of a span (`OTEL_SPAN_FIELDS`), and its attributes among
/// those it reads.
fn span(out: &mut Vec<u8>, s: &Span) {
    let mut o = Object::open(out);
    o.text("traceId", &hex(&s.trace_id));
    o.text("spanId", &hex(&s.span_id));
    o.text("name", &s.name);
    if s.start_time_unix_nano != 0 {
        o.text("startTimeUnixNano", &s.start_time_unix_nano.to_string());
    }
    if s.end_time_unix_nano != 0 {
        o.text("endTimeUnixNano", &s.end_time_unix_nano.to_string());
    }
    let read = |kv: &&KeyValue| OTEL_SPAN_ATTRIBUTES.contains(&kv.key.as_str());
    let attributes: Vec<&KeyValue> = s.attributes.iter().filter(read).collect();
    if !attributes.is_empty() {
        array(o.key("attributes"), &attributes, |out, kv| {
            key_value(out, kv)
        });
    }
    if let Some(status) = &s.status {
        let mut st = Object::open(o.key("status"));
        st.text("message", &status.message);
        if status.code != 0 {
            st.number("code", status.code);
        }
        st.close();
    }
    o.close();
}

fn key_value(out: &mut Vec<u8>, kv: &KeyValue) {
    let mut o = Object::open(out);
    string(o.key("key"), &kv.key);
    match &kv.value {
        Some(v) => any_value(o.key("value"), v),
        None => o.key("value").extend_from_slice(b"{}"),
    }
    o.close();
}

fn any_value(out: &mut Vec<u8>, v: &AnyValue) {
    use any_value::Value as V;
    let mut o = Object::open(out);
    match &v.value {
        Some(V::StringValue(s)) => string(o.key("stringValue"), s),
        Some(V::BoolValue(b)) => o.number("boolValue", b),
        Some(V::IntValue(i)) => o.text("intValue", &i.to_string()),
        // Proto3 JSON writes the non-finite doubles as strings.
        Some(V::DoubleValue(d)) if d.is_nan() => o.text("doubleValue", "NaN"),
        Some(V::DoubleValue(d)) if d.is_infinite() => o.text(
            "doubleValue",
            if *d > 0.0 { "Infinity" } else { "-Infinity" },
        ),
        Some(V::DoubleValue(d)) => {
            serde_json::to_writer(o.key("doubleValue"), d).expect("a number writes to memory")
        }
        Some(V::ArrayValue(a)) => {
            let mut values = Object::open(o.key("arrayValue"));
            array(values.key("values"), &a.values, any_value);
            values.close();
        }
        Some(V::KvlistValue(kv)) => {
            let mut values = Object::open(o.key("kvlistValue"));
            array(values.key("values"), &kv.values, key_value);
            values.close();
        }
        Some(V::BytesValue(b)) => o.text(
            "bytesValue",
            &base64::engine::general_purpose::STANDARD.encode(b),
        ),
        // A reference into a dictionary that only profiles carry, or no value: empty.
        Some(V::StringValueStrindex(_)) | None => {}
    }
    o.close();
}

/// A JSON object being written into `out`: each field after the first is preceded by a comma.
struct Object<'a> {
    out: &'a mut Vec<u8>,
    empty: bool,
}

impl<'a> Object<'a> {
    fn open(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Object { out, empty: true }
    }

    /// Writes the field's name; its value goes into what it returns.
    fn key(&mut self, key: &str) -> &mut Vec<u8> {
        if !self.empty {
            self.out.push(b',');
        }
        self.empty = false;
        string(self.out, key);
        self.out.push(b':');
        self.out
    }

    /// A string field, left out when empty (proto3's default).
    fn text(&mut self, key: &str, value: &str) {
        if !value.is_empty() {
            string(self.key(key), value);
        }
    }

    fn number(&mut self, key: &str, value: impl std::fmt::Display) {
        let out = self.key(key);
        out.extend_from_slice(value.to_string().as_bytes());
    }

    fn close(self) {
        self.out.push(b'}');
    }
}

fn string(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(out, s).expect("a string writes to memory");
}

fn array<T>(out: &mut Vec<u8>, items: &[T], mut each: impl FnMut(&mut Vec<u8>, &T)) {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        each(out, item);
    }
    out.push(b']');
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
        let line = protobuf_to_json_line(&request.encode_to_vec(), usize::MAX).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&line).unwrap();
        let span = &doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        assert_eq!(span["traceId"], "000102030405060708090a0b0c0d0e0f");
        assert_eq!(span["spanId"], "abababababababab");
        assert_eq!(span["startTimeUnixNano"], "1775044801000000000");
        assert_eq!(span["status"]["code"], 2);
        let names: Vec<&str> = span["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|kv| kv["key"].as_str().unwrap())
            .collect();
        assert_eq!(
            names.len(),
            5,
            "an attribute the adapter does not read is left out"
        );
        assert!(!names.contains(&"retries"));
        let mut fields: Vec<&str> = span
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut read: Vec<&str> = toolcalls_adapters::OTEL_SPAN_FIELDS.to_vec();
        read.push("attributes");
        fields.sort_unstable();
        read.sort_unstable();
        assert_eq!(fields, read, "every field the adapter reads, and no other");
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
        assert!(protobuf_to_json_line(b"\xff\xff\xff", usize::MAX).is_err());
    }

    /// Millions of empty attributes fit a small body: past one value per 16 bytes of the body
    /// limit the export is refused before it is read, nested values counted too.
    #[test]
    fn an_export_of_more_attribute_values_than_allowed_is_refused() {
        let nested = kv(
            "list",
            any_value::Value::ArrayValue(opentelemetry_proto::tonic::common::v1::ArrayValue {
                values: vec![AnyValue::default(); 3],
            }),
        );
        let span = |n: usize| Span {
            name: "execute_tool t".into(),
            attributes: std::iter::repeat_n(KeyValue::default(), n)
                .chain([nested.clone()])
                .collect(),
            ..Span::default()
        };
        let request = |n: usize| ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans: vec![span(n)],
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            }],
        };
        let body = request(96).encode_to_vec();
        assert!(protobuf_to_json_line(&body, 100).is_ok());
        let body = request(97).encode_to_vec();
        let refused = protobuf_to_json_line(&body, 100).unwrap_err();
        assert!(refused.contains("101 attribute values"), "{refused}");
    }

    /// A span that names no session, and has no trace id to stand in, is refused: the request's
    /// name is no session.
    #[test]
    fn a_span_that_names_no_session_is_refused() {
        use crate::receive::traces::{read, Encoding};
        let span = |attrs: &str, trace: &str| {
            format!(
                r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{{"name":"execute_tool t",{trace}"startTimeUnixNano":"1775044801000000000","endTimeUnixNano":"1775044802000000000","attributes":[{{"key":"gen_ai.operation.name","value":{{"stringValue":"execute_tool"}}}},{{"key":"gen_ai.tool.name","value":{{"stringValue":"t"}}}}{attrs}]}}]}}]}}]}}"#
            )
        };
        let why = read(Encoding::Json, span("", "").as_bytes(), usize::MAX).unwrap_err();
        assert!(why.contains("names no session"), "{why}");
        let traced = span("", r#""traceId":"000102030405060708090a0b0c0d0e0f","#);
        let events = read(Encoding::Json, traced.as_bytes(), usize::MAX).unwrap();
        assert_eq!(
            events[0].session.as_str(),
            "000102030405060708090a0b0c0d0e0f"
        );
        let named = span(r#",{"key":"session.id","value":{"stringValue":"s1"}}"#, "");
        let events = read(Encoding::Json, named.as_bytes(), usize::MAX).unwrap();
        assert_eq!(events[0].session.as_str(), "s1");
    }
}

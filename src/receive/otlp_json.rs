//! An OTLP JSON trace body → one line of OTLP JSON holding only what the otel adapter reads
//! (`toolcalls_adapters`, `Format::Otel`): every span, with the fields of
//! [`OTEL_SPAN_FIELDS`] and the attributes named in [`OTEL_SPAN_ATTRIBUTES`], each as sent. The
//! rest — resource and scope attributes, span events and links, every other attribute — is
//! checked to be JSON and dropped unread. Read into a tree it cost about 35 times the body (an
//! 8 MiB export of 170,000 small attributes took 293 MB), whatever few spans it held.
//!
//! The line reads as the body does. Every element of `resourceSpans`, `scopeSpans` and `spans` is
//! kept, so that the adapter's messages name the same positions; one that is not an object, which
//! the adapter reads as holding nothing, is written `null`, which it reads so too. A field given
//! twice in one object is kept twice, in order: the adapter, as serde_json, takes the last. Keys
//! are compared decoded, escapes and all; a lone surrogate escape in one is no error (it names
//! nothing the adapter reads). Values are copied as their text, so a value a tree cannot hold
//! exactly (a lone surrogate, `1e400`) reaches the adapter as it would have.

use serde_json::value::RawValue;
use toolcalls_adapters::raw::{array, last, object, Key};
use toolcalls_adapters::{OTEL_SPAN_ATTRIBUTES, OTEL_SPAN_FIELDS};

/// The body as one line of what the adapter reads, or why it is no OTLP JSON export; one whose
/// line holds more than `max_values` JSON values (a kept attribute of millions of tiny values,
/// a tree of which would cost the adapter a hundred bytes each) is refused.
pub fn json_to_json_line(body: &[u8], max_values: usize) -> Result<Vec<u8>, String> {
    let not_json = |e: &dyn std::fmt::Display| {
        format!("the body is not JSON ({e}); expected an OTLP JSON ExportTraceServiceRequest")
    };
    let text = std::str::from_utf8(body).map_err(|e| not_json(&e))?;
    let doc: &RawValue = serde_json::from_str(text).map_err(|e| not_json(&e))?;
    // Refused as every reader of JSON here refuses it, also where the adapter would not look.
    toolcalls_model::json::check_depth(text).map_err(|e| not_json(&e))?;
    let no_spans = || {
        "the body has no `resourceSpans` array; expected an OTLP JSON ExportTraceServiceRequest"
            .to_string()
    };
    let fields = object(doc).ok_or_else(no_spans)?;
    // `{}` is an export of no spans (proto3's JSON leaves an empty repeated field out).
    if fields.is_empty() {
        return Ok(b"{}".to_vec());
    }
    let resource_spans = last(&fields, "resourceSpans")
        .and_then(array)
        .ok_or_else(no_spans)?;
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"resourceSpans\":");
    elements(&mut out, &resource_spans, |out, fields| {
        // The adapter reads `instrumentationLibrarySpans` only where there is no `scopeSpans`.
        let scopes = if fields.iter().any(|(key, _)| key.is("scopeSpans")) {
            "scopeSpans"
        } else {
            "instrumentationLibrarySpans"
        };
        keep(
            out,
            fields,
            |key| key == scopes,
            |out, _, v| {
                nested(out, v, |out, fields| {
                    keep(
                        out,
                        fields,
                        |key| key == "spans",
                        |out, _, v| {
                            nested(out, v, span);
                        },
                    );
                });
            },
        );
    });
    out.push(b'}');
    let values = values_in(&out);
    if values > max_values {
        return Err(format!(
            "the export's spans hold {values} JSON values in the fields and attributes the \
             receiver reads, more than the {max_values} a request may (one per 16 bytes of \
             --max-body-bytes); send smaller batches"
        ));
    }
    Ok(out)
}

/// About how many values JSON text holds: its objects, arrays and the commas between items.
fn values_in(text: &[u8]) -> usize {
    let (mut n, mut in_string, mut escaped) = (0, false, false);
    for &b in text {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else {
            match b {
                b'"' => in_string = true,
                b'{' | b'[' | b',' => n += 1,
                _ => {}
            }
        }
    }
    n
}

/// A span: the fields the adapter reads, its attributes only those it reads, its status only
/// its code and message. What the adapter reads as absent when it is no array or object is
/// written `null`.
fn span(out: &mut Vec<u8>, fields: &[(Key, &RawValue)]) {
    let read = |key: &str| key == "attributes" || OTEL_SPAN_FIELDS.contains(&key);
    keep(out, fields, read, |out, key, v| match key {
        "attributes" => match array(v) {
            Some(items) => write_list(
                out,
                items
                    .iter()
                    .filter(|kv| is_read_attribute(kv))
                    .map(|kv| kv.get()),
            ),
            None => out.extend_from_slice(b"null"),
        },
        "status" => match object(v) {
            Some(status) => keep(out, &status, |k| k == "code" || k == "message", raw),
            None => out.extend_from_slice(b"null"),
        },
        _ => raw(out, key, v),
    });
}

fn raw(out: &mut Vec<u8>, _key: &str, value: &RawValue) {
    out.extend_from_slice(value.get().as_bytes());
}

/// Whether an attribute (`{"key": …, "value": …}`) is one the adapter reads: a `key` it
/// gives names one (the last given is the one the adapter takes; keeping the pair whole keeps
/// that).
fn is_read_attribute(kv: &RawValue) -> bool {
    object(kv).is_some_and(|fields| {
        fields.iter().any(|(key, v)| {
            key.is("key")
                && serde_json::from_str::<Key>(v.get()).is_ok_and(|name| {
                    OTEL_SPAN_ATTRIBUTES
                        .iter()
                        .any(|attribute| name.is(attribute))
                })
        })
    })
}

/// Writes the object `fields` with only the fields `wanted` names, each written by `each` (given
/// its name).
fn keep(
    out: &mut Vec<u8>,
    fields: &[(Key, &RawValue)],
    wanted: impl Fn(&str) -> bool,
    mut each: impl FnMut(&mut Vec<u8>, &str, &RawValue),
) {
    out.push(b'{');
    let mut first = true;
    for (key, value) in fields {
        let Some(name) = key.as_str().filter(|k| wanted(k)) else {
            continue;
        };
        if !first {
            out.push(b',');
        }
        first = false;
        serde_json::to_writer(&mut *out, name).expect("a string writes to memory");
        out.push(b':');
        each(out, name, value);
    }
    out.push(b'}');
}

/// An array of objects, each written by `each`, or `null` in place of what is no array.
fn nested(
    out: &mut Vec<u8>,
    value: &RawValue,
    each: impl FnMut(&mut Vec<u8>, &[(Key, &RawValue)]),
) {
    match array(value) {
        Some(items) => elements(out, &items, each),
        None => out.extend_from_slice(b"null"),
    }
}

/// The elements of an array: an object written by `each`, anything else `null`.
fn elements(
    out: &mut Vec<u8>,
    items: &[&RawValue],
    mut each: impl FnMut(&mut Vec<u8>, &[(Key, &RawValue)]),
) {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match object(item) {
            Some(fields) => each(out, &fields),
            None => out.extend_from_slice(b"null"),
        }
    }
    out.push(b']');
}

fn write_list<'a>(out: &mut Vec<u8>, items: impl Iterator<Item = &'a str>) {
    out.push(b'[');
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item.as_bytes());
    }
    out.push(b']');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receive::traces::{read, Encoding};
    use toolcalls_adapters::{parse, Format, Options, Parsed};
    use toolcalls_model::EventBody;

    fn read_by_the_adapter(body: &[u8]) -> Parsed {
        parse(Format::Otel, "request", body, &Options::default())
    }

    fn said(p: &Parsed) -> Vec<String> {
        p.errors.iter().map(ToString::to_string).collect()
    }

    /// What the adapter does not read is left out, and what is left reads as the whole export:
    /// resource, scope, events and links, other attributes, a status's other fields, elements
    /// that are no objects, fields given twice, escaped keys, values a tree cannot hold.
    #[test]
    fn a_pared_export_reads_as_the_whole_one() {
        let junk = r#"{"key":"http.body","value":{"arrayValue":{"values":[{"stringValue":"x"},{"kvlistValue":{"values":[{"key":"deep","value":{"intValue":"1"}}]}}]}}}"#;
        let span = |extra: &str| {
            format!(
                r#"{{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","parentSpanId":"c1a2b3d4e5f60718","name":"execute_tool get_forecast","kind":1,"startTimeUnixNano":"1775044801010000000","endTimeUnixNano":"1775044801300000000","events":[{{"name":"log","attributes":[{junk}]}}],"links":[{{"traceId":"00","attributes":[{junk}]}}],"attributes":[{junk},{{"key":"gen_ai.operation.name","value":{{"stringValue":"execute_tool"}}}},{{"key":"gen_ai.tool.name","value":{{"stringValue":"get_forecast"}}}},{{"key":"gen_ai.tool.call.id","value":{{"stringValue":"call_w2"}}}},{{"key":"gen_ai.tool.call.id","value":{{"stringValue":"call_w3"}}}},{{"key":"\u0067en_ai.conversation.id","value":{{"stringValue":"conv-\ud83d"}}}},{{"key":"cut \udc00","value":{{"stringValue":"x"}}}},{{"key":"gen_ai.tool.call.arguments","value":{{"stringValue":"{{\"days\":1e400}}"}}}},{{"key":"gen_ai.tool.call.result","value":{{"kvlistValue":{{"values":[{{"key":"n","value":{{"doubleValue":1.5}}}}]}}}}}},{junk}]{extra}}}"#
            )
        };
        let body = format!(
            r#"{{"resourceSpans":[{{"resource":{{"attributes":[{junk}]}},"scopeSpans":[{{"scope":{{"name":"s","attributes":[{junk}]}},"spans":[{},{},"not a span",{},{}]}}],"schemaUrl":"u"}},7,{{"instrumentationLibrarySpans":[{{"spans":[{}]}}]}},{{"scopeSpans":"none","instrumentationLibrarySpans":[{{"spans":[{}]}}]}}],"resourceSpans2":[]}}"#,
            span(r#","status":{"code":2,"message":"boom","junk":[1,2,3]}"#),
            span(r#","status":{"code":"STATUS_CODE_ERROR"},"status":{}"#),
            span(r#","name":["not","text"],"attributes":{"key":"gen_ai.tool.name"}"#),
            span(r#","traceId":17"#),
            span(""),
            span(""),
        );
        let whole = read_by_the_adapter(body.as_bytes());
        assert!(whole.events.len() >= 6, "{:?}", said(&whole));
        assert!(
            !whole.errors.is_empty(),
            "a span with a traceId of the wrong type"
        );
        let line = json_to_json_line(body.as_bytes(), usize::MAX).unwrap();
        let pared = read_by_the_adapter(&line);
        assert_eq!(pared.events, whole.events);
        assert_eq!(said(&pared), said(&whole));
        assert_eq!(pared.skipped, whole.skipped);
        let line = String::from_utf8(line).unwrap();
        for gone in [
            "http.body",
            "parentSpanId",
            "links",
            "schemaUrl",
            "junk",
            "cut \\udc00",
        ] {
            assert!(!line.contains(gone), "{gone} left in {line}");
        }
        assert!(line.len() * 2 < body.len(), "{line}");
    }

    /// The adapter's own sample reads the same pared.
    #[test]
    fn the_adapters_sample_reads_the_same_pared() {
        let sample = include_str!("../../crates/adapters/tests/data/otel-genai-spans.jsonl");
        for export in sample.lines() {
            let whole = read_by_the_adapter(export.as_bytes());
            let line = json_to_json_line(export.as_bytes(), usize::MAX).unwrap();
            let pared = read_by_the_adapter(&line);
            assert!(!whole.events.is_empty());
            assert_eq!(pared.events, whole.events);
            assert_eq!(said(&pared), said(&whole));
            assert!(line.len() < export.len());
        }
    }

    /// Millions of tiny values in an attribute the adapter reads would cost it a hundred bytes
    /// each: past `max_values` the export is refused.
    #[test]
    fn an_export_of_more_values_than_allowed_is_refused() {
        let body = |n: usize| {
            let values = vec![r#"{"stringValue":"x"}"#; n].join(",");
            format!(
                r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{{"name":"execute_tool t","attributes":[{{"key":"gen_ai.tool.call.result","value":{{"arrayValue":{{"values":[{values}]}}}}}},{{"key":"other","value":{{"arrayValue":{{"values":[{values}]}}}}}}]}}]}}]}}]}}"#
            )
        };
        let count = |n| values_in(&json_to_json_line(body(n).as_bytes(), usize::MAX).unwrap());
        let (small, large) = (count(10), count(1_000));
        assert!(large > 2_000 && large < 2_100, "two a value: {large}");
        assert!(json_to_json_line(body(1_000).as_bytes(), large).is_ok());
        let refused = json_to_json_line(body(1_000).as_bytes(), large - 1).unwrap_err();
        assert!(
            refused.contains(&format!("{large} JSON values")),
            "{refused}"
        );
        assert!(
            small < 40,
            "the attribute not read is not counted (it would add 20): {small}"
        );
    }

    #[test]
    fn an_empty_export_reads_as_its_protobuf_twin() {
        for body in [&b"{}"[..], b" { } "] {
            assert_eq!(json_to_json_line(body, usize::MAX).unwrap(), b"{}");
            assert_eq!(read(Encoding::Json, body, usize::MAX).unwrap(), []);
        }
        assert_eq!(read(Encoding::Protobuf, b"", usize::MAX).unwrap(), []);
        for not_an_export in [&br#"{"spans":[]}"#[..], b"[]", br#"{"resourceSpans":{}}"#] {
            let why = json_to_json_line(not_an_export, usize::MAX).unwrap_err();
            assert!(why.contains("no `resourceSpans` array"), "{why}");
        }
    }

    #[test]
    fn json_bodies_with_lone_surrogates_are_read() {
        // What the Python SDK's JSON exporter writes for a string holding a lone surrogate.
        let body = br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"execute_tool cut \ud83d","traceId":"5b8efff798038103d269b633813fc60c","startTimeUnixNano":"1775044801010000000","endTimeUnixNano":"1775044801300000000"}]}]}]}"#;
        let events = read(Encoding::Json, body, usize::MAX).unwrap();
        let EventBody::Announce(a) = &events[0].body else {
            panic!("{events:?}")
        };
        assert_eq!(a.tool, "cut \u{fffd}");
        for broken in [&br#"{"resourceSpans":[}"#[..], b"{\"a\":\"\xff\"}", b""] {
            let why = json_to_json_line(broken, usize::MAX).unwrap_err();
            assert!(why.contains("not JSON"), "{why}");
        }
    }
}

//! The receiver's readers fed odd and mutated bodies, in process: Claude Code hook payloads, v1
//! event lines, OTLP JSON, and OTLP protobuf export requests (generated with odd attributes,
//! times and ids, then often their bytes mutated), some of them gzip- or zlib-compressed (and
//! then at times mutated) as a compressed request comes. None may panic, and every event a body gives
//! must be one the processor takes: it decodes from its encoding as the same event, redacted or
//! not (the receiver redacts, then publishes the encoding).
//!
//! `TOOLCALLS_FUZZ_CASES` / `TOOLCALLS_FUZZ_SECS` / `TOOLCALLS_FUZZ_SEED` as for every fuzz test
//! (`scripts/fuzz.sh` is the long run).

use crate::fuzz_support as support;

use super::compression::Encoding as Compression;
use super::traces::Encoding;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    any_value, AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{status, ResourceSpans, ScopeSpans, Span, Status};
use prost::Message as _;
use std::path::Path;
use support::Rng;
use toolcalls_model::redact::Redaction;
use toolcalls_model::{Event, Timestamp};

/// What a case sends, and to which route.
enum Route {
    Hooks,
    Events,
    Traces(Encoding),
}

fn route_of(case: u64) -> Route {
    match case % 4 {
        0 => Route::Hooks,
        1 => Route::Events,
        2 => Route::Traces(Encoding::Json),
        _ => Route::Traces(Encoding::Protobuf),
    }
}

fn sample(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/adapters/tests/data")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A file as a corpus: the whole of it, and each of its lines.
fn whole_and_lines(bytes: Vec<u8>) -> Vec<Vec<u8>> {
    let mut corpus: Vec<Vec<u8>> = bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    corpus.push(bytes);
    corpus
}

#[test]
fn no_body_panics_the_receiver_and_every_event_it_gives_is_one_the_processor_takes() {
    let hooks = whole_and_lines(sample("claude-hooks.jsonl"));
    let v1 = support::v1_events();
    let otlp_json = whole_and_lines(sample("otel-genai-spans.jsonl"));
    let odd = support::odd_values();
    let redaction =
        Redaction::new(&["/command".to_owned()], &["[0-9a-f]{8,}".to_owned()]).expect("the rules");
    let budget = support::Budget::from_env(2_000);
    support::run(
        "receive",
        &budget,
        |rng, case| {
            let body = match route_of(case) {
                Route::Hooks => {
                    let base = rng.pick(&hooks).clone();
                    support::mutate(rng, &base, &hooks, &odd)
                }
                Route::Events => {
                    let base = rng.pick(&v1).clone();
                    support::mutate(rng, &base, &v1, &odd)
                }
                Route::Traces(Encoding::Json) => {
                    let base = rng.pick(&otlp_json).clone();
                    support::mutate(rng, &base, &otlp_json, &odd)
                }
                Route::Traces(Encoding::Protobuf) => {
                    let bytes = export_request(rng, &odd).encode_to_vec();
                    if rng.chance(50) {
                        mutate_bytes(rng, bytes)
                    } else {
                        bytes
                    }
                }
            };
            compressed_at_times(rng, body)
        },
        |body| {
            read_by_every_route(body, &redaction);
            // As a compressed body: what it decompresses to (within the limit) is read too.
            for encoding in [Compression::Gzip, Compression::Deflate] {
                if let Ok(plain) = super::compression::inflate(encoding, body, INFLATE_LIMIT) {
                    assert!(plain.len() <= INFLATE_LIMIT);
                    read_by_every_route(&plain, &redaction);
                }
            }
        },
    );
}

/// The `--max-body-bytes` the fuzzed bodies decompress within.
const INFLATE_LIMIT: usize = 1 << 20;

/// `body`, one time in five gzip- or zlib-compressed, and then one time in two its compressed
/// bytes mutated.
fn compressed_at_times(rng: &mut Rng, body: Vec<u8>) -> Vec<u8> {
    use std::io::Write as _;
    if !rng.chance(20) {
        return body;
    }
    let compressed = if rng.chance(50) {
        let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        w.write_all(&body).and_then(|()| w.finish())
    } else {
        let mut w = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        w.write_all(&body).and_then(|()| w.finish())
    }
    .expect("compressing into memory");
    if rng.chance(50) {
        mutate_bytes(rng, compressed)
    } else {
        compressed
    }
}

/// The route is the case's, which `run` does not pass on: every reader takes the body, as a
/// client may send any body to any route.
fn read_by_every_route(body: &[u8], redaction: &Redaction) {
    let at = Timestamp::from_millis(1_780_000_000_000);
    let results = [
        super::hooks::read(body, |_, _| at),
        super::events::read(body),
        super::traces::read(Encoding::Json, body, usize::MAX),
        super::traces::read(Encoding::Protobuf, body, usize::MAX),
    ];
    pared_as_read_whole(body);
    for events in results.into_iter().flatten() {
        for event in events {
            taken_by_the_processor(&event);
            let mut redacted = event.clone();
            redaction.apply_event(&mut redacted);
            taken_by_the_processor(&redacted);
        }
    }
}

/// An OTLP JSON body pared to what the otel adapter reads gives the events and errors the adapter
/// gives reading the body whole (as it reads a file of such exports).
fn pared_as_read_whole(body: &[u8]) {
    use toolcalls_adapters::{parse, Format, Options};
    // One export on one line: the adapter reads a body of several lines line by line.
    let body = body.trim_ascii();
    if body.contains(&b'\n') {
        return;
    }
    let Ok(line) = super::otlp_json::json_to_json_line(body, usize::MAX) else {
        return;
    };
    let whole = parse(Format::Otel, "request", body, &Options::default());
    let pared = parse(Format::Otel, "request", &line, &Options::default());
    assert_eq!(
        (&pared.events, pared.errors.len(), pared.skipped),
        (&whole.events, whole.errors.len(), whole.skipped),
        "pared: {}",
        String::from_utf8_lossy(&line)
    );
    let say = |p: &toolcalls_adapters::Parsed| -> Vec<String> {
        p.errors.iter().map(ToString::to_string).collect()
    };
    assert_eq!(say(&pared), say(&whole));
}

/// The event decodes from its encoding (what the receiver publishes) as itself.
fn taken_by_the_processor(event: &Event) {
    let payload = event.encode();
    match Event::decode(&payload) {
        Ok(decoded) => assert_eq!(
            &decoded,
            event,
            "the event read back differs: {}",
            String::from_utf8_lossy(&payload)
        ),
        Err(e) => panic!(
            "the processor refuses what the receiver would publish ({}): {}",
            e.reason(),
            String::from_utf8_lossy(&payload)
        ),
    }
}

/// An export request of a few spans, most of them `execute_tool` spans, with odd values where
/// they can be: times at the ends of their range and out of order, ids of any length, arguments
/// and results that are odd JSON texts (lone surrogates, huge numbers, deep nesting), attributes
/// of every value type nested a few levels.
fn export_request(rng: &mut Rng, odd: &[String]) -> ExportTraceServiceRequest {
    let spans = (0..rng.below(4))
        .map(|_| span(rng, odd))
        .collect::<Vec<_>>();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    string_kv("service.name", &text(rng, odd)),
                    KeyValue {
                        key: "odd".into(),
                        value: Some(any(rng, odd, 3)),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: rng.chance(50).then(|| InstrumentationScope {
                    name: text(rng, odd),
                    version: text(rng, odd),
                    ..Default::default()
                }),
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn span(rng: &mut Rng, odd: &[String]) -> Span {
    let mut attributes = Vec::new();
    if rng.chance(85) {
        attributes.push(string_kv("gen_ai.operation.name", "execute_tool"));
    }
    for key in [
        "gen_ai.tool.name",
        "gen_ai.tool.call.id",
        "gen_ai.conversation.id",
        "gen_ai.agent.name",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "error.type",
    ] {
        if rng.chance(70) {
            let value = if rng.chance(80) {
                AnyValue {
                    value: Some(any_value::Value::StringValue(text(rng, odd))),
                }
            } else {
                any(rng, odd, 2)
            };
            attributes.push(KeyValue {
                key: key.into(),
                value: Some(value),
                ..Default::default()
            });
        }
    }
    let times = [
        0,
        1,
        1_775_044_801_000_000_000,
        1_775_044_801_750_000_000,
        i64::MAX as u64,
        i64::MAX as u64 + 1,
        u64::MAX,
        17_000_000_000_000_000_000,
    ];
    Span {
        trace_id: id_bytes(rng),
        span_id: id_bytes(rng),
        parent_span_id: id_bytes(rng),
        name: format!("execute_tool {}", text(rng, odd)),
        kind: *rng.pick(&[0, 1, 3, -1, i32::MAX]),
        start_time_unix_nano: *rng.pick(&times),
        end_time_unix_nano: *rng.pick(&times),
        attributes,
        status: rng.chance(60).then(|| Status {
            message: text(rng, odd),
            code: *rng.pick(&[
                status::StatusCode::Unset as i32,
                status::StatusCode::Ok as i32,
                status::StatusCode::Error as i32,
                7,
                -3,
            ]),
        }),
        ..Default::default()
    }
}

/// A string attribute's text: plain, an odd JSON text, or arguments holding one.
fn text(rng: &mut Rng, odd: &[String]) -> String {
    match rng.below(4) {
        0 => "Bash".into(),
        1 => rng.pick(odd).clone(),
        2 => format!("{{\"command\":{},\"n\":{}}}", rng.pick(odd), rng.pick(odd)),
        _ => String::new(),
    }
}

fn id_bytes(rng: &mut Rng) -> Vec<u8> {
    let len = *rng.pick(&[0usize, 8, 16, 3, 40]);
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

/// A value of any type, containers nested up to `depth` levels.
fn any(rng: &mut Rng, odd: &[String], depth: usize) -> AnyValue {
    use any_value::Value as V;
    let value = match rng.below(if depth == 0 { 5 } else { 7 }) {
        0 => V::StringValue(text(rng, odd)),
        1 => V::BoolValue(rng.chance(50)),
        2 => V::IntValue(*rng.pick(&[0, -1, i64::MIN, i64::MAX])),
        3 => V::DoubleValue(*rng.pick(&[
            0.0,
            -0.0,
            1.5,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
            f64::MIN_POSITIVE,
        ])),
        4 => V::BytesValue((0..rng.below(20)).map(|_| rng.next_u64() as u8).collect()),
        5 => V::ArrayValue(ArrayValue {
            values: (0..rng.below(4))
                .map(|_| any(rng, odd, depth - 1))
                .collect(),
        }),
        _ => V::KvlistValue(KeyValueList {
            values: (0..rng.below(4))
                .map(|_| KeyValue {
                    key: text(rng, odd),
                    value: Some(any(rng, odd, depth - 1)),
                    ..Default::default()
                })
                .collect(),
        }),
    };
    AnyValue { value: Some(value) }
}

fn string_kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        ..Default::default()
    }
}

/// Protobuf bytes changed in one to three places: a byte flipped, the end cut off, a byte
/// inserted, a run repeated.
fn mutate_bytes(rng: &mut Rng, mut bytes: Vec<u8>) -> Vec<u8> {
    for _ in 0..1 + rng.below(3) {
        if bytes.is_empty() {
            bytes.push(rng.next_u64() as u8);
            continue;
        }
        let at = rng.below(bytes.len());
        match rng.below(4) {
            0 => bytes[at] ^= 1 << rng.below(8),
            1 => bytes.truncate(at),
            2 => bytes.insert(at, rng.next_u64() as u8),
            _ => {
                let end = (at + 1 + rng.below(16)).min(bytes.len());
                let run = bytes[at..end].to_vec();
                bytes.splice(at..at, run);
            }
        }
    }
    bytes
}

//! The core path on one core: decode a v1 event, compute the checksum when it is absent,
//! correlate, and encode every record published — against plain `serde_json` parsing of the
//! same bytes into a `Value`, measured in the same run.
//!
//! `cargo bench -p toolcalls-benches --bench core`
//! (results and their reading: benches/README.md)

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::hint::black_box;
use toolcalls_core::{Config, Correlator, Effects, Position};
use toolcalls_model::{checksum, Event, EventBody, RecordId};

/// The allocator of the `toolcalls` binary (src/main.rs).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn bench_core(c: &mut Criterion) {
    let events = toolcalls_benches::mix(20_000, 42);
    let bytes: usize = events.iter().map(Vec::len).sum();
    let mut group = c.benchmark_group("core");
    group.throughput(Throughput::Elements(events.len() as u64));
    eprintln!(
        "input: {} events, {} bytes, {:.0} bytes/event",
        events.len(),
        bytes,
        bytes as f64 / events.len() as f64
    );

    group.bench_function("serde_json_value_parse", |b| {
        b.iter(|| {
            for e in &events {
                black_box(serde_json::from_slice::<serde_json::Value>(e).unwrap());
            }
        })
    });

    group.bench_function("decode_only", |b| {
        b.iter(|| {
            for e in &events {
                black_box(Event::decode(e).unwrap());
            }
        })
    });

    for changelog in [false, true] {
        let name = if changelog {
            "decode_correlate_encode_with_changelog"
        } else {
            "decode_correlate_encode"
        };
        group.bench_function(name, |b| {
            b.iter_batched_ref(
                || {
                    let correlator = if changelog {
                        Correlator::new(Config::default())
                    } else {
                        Correlator::without_changelog(Config::default())
                    };
                    (correlator, Effects::default(), Vec::with_capacity(4096))
                },
                |(correlator, out, buf)| core_path(&events, correlator, out, buf, changelog),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
    bench_parts(c, &events);
}

/// What the core path must do whatever the correlation costs, each alone over the same input: the
/// ADK checksum of every announce's tool and arguments, the record id (a UUID v5, SHA-1) of every
/// call, and the encoding of every record the core path publishes. The core path's time less
/// these and `decode_only` is what correlating itself costs (benches/README.md, "Core path").
fn bench_parts(c: &mut Criterion, events: &[Vec<u8>]) {
    let decoded: Vec<Event> = events.iter().map(|e| Event::decode(e).unwrap()).collect();
    let announces: Vec<_> = decoded
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Announce(a) => Some((a.tool.as_str(), a.args.as_ref())),
            _ => None,
        })
        .collect();
    let mut correlator = Correlator::without_changelog(Config::default());
    let mut out = Effects::default();
    let mut records = Vec::new();
    for (i, event) in decoded.iter().enumerate() {
        correlator.apply(event.clone(), Position::new(0, i as i64), &mut out);
        records.append(&mut out.records);
    }
    let ids: Vec<_> = records
        .iter()
        .map(|r| {
            let m = &r.metadata;
            (
                m.source.clone(),
                m.session.clone(),
                m.thread.clone(),
                r.correlation.key.clone(),
            )
        })
        .collect();
    let (source, session, thread, key) = &ids[0];
    assert_eq!(
        RecordId::derive(source, session, thread.as_ref(), key),
        records[0].metadata.name,
        "the record id is derived from the key the record names"
    );

    // Per input event, as the core path's figures are, so the rates add up as times.
    let mut group = c.benchmark_group("core_parts");
    group.throughput(Throughput::Elements(events.len() as u64));
    group.bench_function("checksum_of_every_announce", |b| {
        b.iter(|| {
            for (tool, args) in &announces {
                black_box(checksum::digest_of_json(tool, *args));
            }
        })
    });
    group.bench_function("record_id_of_every_call", |b| {
        b.iter(|| {
            for (source, session, thread, key) in &ids {
                black_box(RecordId::derive(source, session, thread.as_ref(), key));
            }
        })
    });
    group.bench_function("encode_every_record", |b| {
        let mut buf = Vec::with_capacity(4096);
        b.iter(|| {
            for r in &records {
                buf.clear();
                r.encode_into(&mut buf);
                black_box(&buf);
            }
        })
    });
    group.finish();
}

/// Decodes, correlates and encodes every record; with `changelog`, flushes the changelog once per
/// batch of 500 events as the runtime does. Returns the bytes produced.
fn core_path(
    events: &[Vec<u8>],
    correlator: &mut Correlator,
    out: &mut Effects,
    buf: &mut Vec<u8>,
    changelog: bool,
) -> usize {
    let mut bytes = 0;
    for (i, e) in events.iter().enumerate() {
        let event = Event::decode(e).unwrap();
        correlator.apply(event, Position::new(0, i as i64), out);
        // Each record is encoded into a reused buffer, as the runtime hands records to the
        // producer one message at a time.
        for r in out.records.drain(..) {
            buf.clear();
            r.encode_into(buf);
            bytes += black_box(&*buf).len();
        }
        if changelog && i % 500 == 499 {
            for op in correlator.take_changelog() {
                bytes += op.key.len() + op.value.map_or(0, |v| black_box(v).len());
            }
        }
    }
    bytes
}

criterion_group!(benches, bench_core);
criterion_main!(benches);

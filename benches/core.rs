//! The core path on one core: decode a v1 event, compute the checksum when it is absent,
//! correlate, and encode every record published — against plain `serde_json` parsing of the
//! same bytes into a `Value`, measured in the same run.
//!
//! `cargo bench -p toolcalls-benches --bench core`
//! (results and their reading: benches/README.md)

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::hint::black_box;
use toolcalls_core::{Config, Correlator, Effects, Position};
use toolcalls_model::Event;

fn core_path(c: &mut Criterion) {
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

    group.bench_function("decode_correlate_encode", |b| {
        b.iter_batched_ref(
            || {
                (
                    Correlator::without_changelog(Config::default()),
                    Effects::default(),
                    Vec::with_capacity(4096),
                )
            },
            |(correlator, out, buf)| {
                let mut bytes = 0;
                for (i, e) in events.iter().enumerate() {
                    let event = Event::decode(e).unwrap();
                    correlator.apply(event, Position::new(0, i as i64), out);
                    // Each record is encoded into a reused buffer, as the runtime hands records to
                    // the producer one message at a time.
                    for r in out.records.drain(..) {
                        buf.clear();
                        serde_json::to_writer(&mut *buf, &r).unwrap();
                        bytes += black_box(&*buf).len();
                    }
                }
                bytes
            },
            BatchSize::LargeInput,
        )
    });

    group.bench_function("decode_correlate_encode_with_changelog", |b| {
        b.iter_batched_ref(
            || {
                (
                    Correlator::new(Config::default()),
                    Effects::default(),
                    Vec::with_capacity(4096),
                )
            },
            |(correlator, out, buf)| {
                let mut bytes = 0;
                for (i, e) in events.iter().enumerate() {
                    let event = Event::decode(e).unwrap();
                    correlator.apply(event, Position::new(0, i as i64), out);
                    // Each record is encoded into a reused buffer, as the runtime hands records to
                    // the producer one message at a time.
                    for r in out.records.drain(..) {
                        buf.clear();
                        serde_json::to_writer(&mut *buf, &r).unwrap();
                        bytes += black_box(&*buf).len();
                    }
                    // The runtime flushes the changelog once per batch of 500 events.
                    if i % 500 == 499 {
                        for op in correlator.take_changelog() {
                            bytes += op.key.len() + op.value.map_or(0, |v| black_box(v).len());
                        }
                    }
                }
                bytes
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, core_path);
criterion_main!(benches);

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

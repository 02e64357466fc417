//! Runs the benchmark's core path in a loop, for a profiler or an instruction count:
//! `cargo build --release -p toolcalls-benches --example core_loop`
//! `perf stat -e instructions target/release/examples/core_loop ROUNDS STAGE`
//! where STAGE is `parse` (serde_json::Value), `decode`, `correlate` (decode + apply) or `all`
//! (the default: what a partition task does — decode, apply with the changelog on, encode every
//! record with `encode_into`, take the changelog every 500 events).
use toolcalls_core::{Config, Correlator, Effects, Position};
use toolcalls_model::Event;

/// The allocator of the `toolcalls` binary (src/main.rs).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let events = toolcalls_benches::mix(20_000, 42);
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let stage = args.next().unwrap_or_else(|| "all".into());
    let mut total = 0usize;
    for _ in 0..rounds {
        let mut correlator = if stage == "all" {
            Correlator::new(Config::default())
        } else {
            Correlator::without_changelog(Config::default())
        };
        let mut out = Effects::default();
        let mut buf = Vec::with_capacity(4096);
        for (i, e) in events.iter().enumerate() {
            match stage.as_str() {
                "parse" => {
                    total += serde_json::from_slice::<serde_json::Value>(e)
                        .map(|v| v.is_object() as usize)
                        .unwrap()
                }
                "decode" => total += Event::decode(e).map(|e| e.time.millis() as usize).unwrap(),
                _ => {
                    let event = Event::decode(e).unwrap();
                    correlator.apply(event, Position::new(0, i as i64), &mut out);
                    for r in out.records.drain(..) {
                        if stage == "all" {
                            buf.clear();
                            r.encode_into(&mut buf);
                            total += buf.len();
                        } else {
                            total += r.correlation.events_merged as usize;
                        }
                    }
                    if stage == "all" && i % 500 == 499 {
                        for op in correlator.take_changelog() {
                            total += op.key.len() + op.value.map_or(0, |v| v.len());
                        }
                    }
                }
            }
        }
    }
    println!("{total}");
}

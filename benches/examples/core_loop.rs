//! Runs the benchmark's core path in a loop, for a profiler:
//! `cargo build --release -p toolcalls-benches --example core_loop && perf record -g target/release/examples/core_loop`
use toolcalls_core::{Config, Correlator, Effects, Position};
use toolcalls_model::Event;

fn main() {
    let events = toolcalls_benches::mix(20_000, 42);
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    let mut total = 0usize;
    for _ in 0..rounds {
        let mut correlator = Correlator::without_changelog(Config::default());
        let mut out = Effects::default();
        let mut sink = Vec::with_capacity(1 << 20);
        for (i, e) in events.iter().enumerate() {
            let event = Event::decode(e).unwrap();
            correlator.apply(event, Position::new(0, i as i64), &mut out);
            for r in out.records.drain(..) {
                serde_json::to_writer(&mut sink, &r).unwrap();
                sink.push(b'\n');
            }
        }
        total += sink.len();
    }
    println!("{total}");
}

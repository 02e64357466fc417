//! Runs the benchmark's core path in a loop, for a profiler or an instruction count:
//! `cargo build --release -p toolcalls-benches --example core_loop`
//! `perf stat -e instructions target/release/examples/core_loop ROUNDS STAGE`
//! where STAGE is `parse` (serde_json::Value), `decode`, `correlate` (decode + apply) or `all`
//! (decode + apply + encode the records, the default).
use toolcalls_core::{Config, Correlator, Effects, Position};
use toolcalls_model::Event;

fn main() {
    let events = toolcalls_benches::mix(20_000, 42);
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let stage = args.next().unwrap_or_else(|| "all".into());
    let mut total = 0usize;
    for _ in 0..rounds {
        let mut correlator = Correlator::without_changelog(Config::default());
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
                            serde_json::to_writer(&mut buf, &r).unwrap();
                            total += buf.len();
                        } else {
                            total += r.correlation.events_merged as usize;
                        }
                    }
                }
            }
        }
    }
    println!("{total}");
}

//! The ledger under at-least-once delivery: on seeded mixed workloads (`toolcalls-workload`:
//! ids on most calls, identical id-less calls, announces and results delivered twice, results
//! before their announce, sessions interleaved), the records are exactly the ground truth — one
//! per call, correctly paired, no extra, no spurious `TimedOut` or `Orphaned`.
//! docs/ARCHITECTURE.md, Correlation → Rules and → Repeats.

use toolcalls_core::{replay, Config, FinishMode};
use toolcalls_model::Event;
use toolcalls_workload::{check, generate, Spec, Workload};

fn events(w: &Workload) -> Vec<Event> {
    w.lines
        .iter()
        .map(|l| Event::decode(l.as_bytes()).expect("a generated event decodes"))
        .collect()
}

fn run(spec: &Spec) -> Result<(), String> {
    let w = generate(spec);
    // With a reorder window too: holding and reordering events must not change the ledger.
    for max_disorder_ms in [0, 5_000] {
        let config = Config {
            max_disorder_ms,
            ..Config::default()
        };
        let replayed = replay(&config, events(&w), FinishMode::Deadlines);
        check(&replayed.records, &w.truth).map_err(|e| {
            format!(
                "seed {}, --max-disorder {max_disorder_ms}ms: {e}",
                spec.seed
            )
        })?;
    }
    Ok(())
}

#[test]
fn mixed_workloads_give_exactly_the_ground_truth() {
    let seeds: u64 = std::env::var("TOOLCALLS_LEDGER_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    for seed in 1..=seeds {
        run(&Spec {
            seed,
            ..Spec::default()
        })
        .unwrap();
    }
}

#[test]
fn many_sessions_few_sessions_and_many_identical_calls() {
    for (sessions, identical, seed) in [(1, 50, 7), (300, 15, 8), (5, 80, 9)] {
        run(&Spec {
            seed,
            sessions,
            identical,
            ..Spec::default()
        })
        .unwrap();
    }
}

/// The check itself finds what is wrong.
#[test]
fn the_check_sees_a_missing_an_extra_and_a_mispaired_record() {
    let w = generate(&Spec {
        calls: 50,
        ..Spec::default()
    });
    let mut records = replay(&Config::default(), events(&w), FinishMode::Deadlines).records;
    check(&records, &w.truth).unwrap();
    let last = records.pop().unwrap();
    assert!(check(&records, &w.truth).unwrap_err().contains("missing"));
    records.push(last.clone());
    records.push(last);
    assert!(check(&records, &w.truth).unwrap_err().contains("extra"));
    records.pop();
    let (a, b) = (
        records[0].status.output.clone(),
        records[1].status.output.clone(),
    );
    records[0].status.output = b;
    records[1].status.output = a;
    assert!(check(&records, &w.truth).is_err());
}

//! Fuzzing the restore: a changelog that is corrupt or foreign — entries dropped, moved under
//! other keys, copied, swapped, their bytes flipped or cut — must be refused with an error or give
//! a correlator that goes on taking events, writing its changelog, closing its calls and being
//! restored again. Nothing may panic: a panic in the restore would stop the partition for good,
//! since every restart reads the same changelog.
//!
//! Each case is a seed: it picks a workload (`toolcalls-workload`, with and without the reorder
//! window), the event the changelog is cut at, and the damage. A bounded run is part of
//! `cargo test`; `TOOLCALLS_FUZZ_SECS=600 scripts/fuzz.sh` is the long run (the knobs:
//! `crates/model/tests/support/fuzz.rs`).

#[path = "../../model/tests/support/fuzz.rs"]
mod fuzz;

use std::collections::BTreeMap;
use toolcalls_core::{Config, Correlator, Effects, Position};
use toolcalls_model::{Event, ToolCallRecord};
use toolcalls_workload::{generate, Spec};

/// The events of the workloads a case starts from, decoded.
fn workloads() -> Vec<Vec<Event>> {
    [(7, 0, 20), (11, 2_000, 60), (13, 0, 100)]
        .into_iter()
        .map(|(seed, max_disorder_ms, idless)| {
            let spec = Spec {
                seed,
                calls: 120,
                sessions: 4,
                idless,
                max_disorder_ms,
                ..Spec::default()
            };
            generate(&spec)
                .lines
                .iter()
                .map(|line| Event::decode(line.as_bytes()).expect("workloads decode"))
                .collect()
        })
        .collect()
}

fn configs() -> [Config; 3] {
    [
        Config::default(),
        Config {
            max_disorder_ms: 3_000,
            ..Config::default()
        },
        // Tiny caps: evictions and forgetting on every few events.
        Config {
            max_pending: 3,
            max_remembered: 4,
            max_forgotten_sessions: 2,
            max_facts_bytes: 1_000,
            ..Config::default()
        },
    ]
}

/// Applies `events` from position `from` on, taking the changelog every `every` events into
/// `changelog` (the latest value per key, as a compacted topic keeps it).
fn run(
    correlator: &mut Correlator,
    events: &[Event],
    from: usize,
    every: usize,
    changelog: &mut BTreeMap<String, Option<Vec<u8>>>,
) -> Vec<ToolCallRecord> {
    let mut out = Effects::default();
    let mut records = Vec::new();
    for (i, event) in events.iter().enumerate() {
        correlator.apply(event.clone(), Position::new(0, (from + i) as i64), &mut out);
        records.append(&mut out.records);
        if i % every == every - 1 {
            for op in correlator.take_changelog() {
                changelog.insert(op.key, op.value);
            }
        }
    }
    for op in correlator.take_changelog() {
        changelog.insert(op.key, op.value);
    }
    records
}

/// Damages a compacted changelog the ways a foreign or corrupt one differs from ours.
fn damage(rng: &mut fuzz::Rng, entries: &mut Vec<(String, Vec<u8>)>) {
    for _ in 0..1 + rng.below(4) {
        if entries.is_empty() {
            return;
        }
        let i = rng.below(entries.len());
        match rng.below(7) {
            0 => {
                entries.swap_remove(i);
            }
            1 => {
                // The value under another entry's key, or under a number of its own.
                let j = rng.below(entries.len());
                entries[j].1 = entries[i].1.clone();
            }
            2 => {
                let key = match rng.below(3) {
                    0 => rng.below(1_000).to_string(),
                    1 => format!("s{}", rng.below(1_000)),
                    _ => ((1u64 << 61) - 1 - rng.below(3) as u64).to_string(),
                };
                let value = entries[i].1.clone();
                entries.retain(|(k, _)| *k != key);
                entries.push((key, value));
            }
            3 => {
                let j = rng.below(entries.len());
                let (a, b) = (entries[i].1.clone(), entries[j].1.clone());
                entries[i].1 = b;
                entries[j].1 = a;
            }
            4 => {
                let value = &mut entries[i].1;
                if !value.is_empty() {
                    let at = rng.below(value.len());
                    value[at] ^= 1 << rng.below(8);
                }
            }
            5 => {
                let value = &mut entries[i].1;
                let keep = rng.below(value.len() + 1);
                value.truncate(keep);
            }
            _ => {
                let value = &mut entries[i].1;
                let at = rng.below(value.len() + 1);
                value.insert(at, rng.next_u64() as u8);
            }
        }
    }
    // The order a topic is read in is not the order keys were written in.
    for i in (1..entries.len()).rev() {
        let j = rng.below(i + 1);
        entries.swap(i, j);
    }
}

fn check_records(records: &[ToolCallRecord]) {
    for record in records {
        let encoded = record.encode();
        serde_json::from_slice::<serde::de::IgnoredAny>(&encoded).unwrap_or_else(|e| {
            panic!(
                "an encoded record is not JSON ({e}): {}",
                String::from_utf8_lossy(&encoded)
            )
        });
    }
}

/// One case: everything follows from the seed in `input`.
fn case(input: &[u8], workloads: &[Vec<Event>]) {
    let seed = u64::from_le_bytes(input.try_into().expect("a case is its seed"));
    let mut rng = fuzz::Rng::new(seed);
    let events = rng.pick(workloads);
    let configs = configs();
    let config = rng.pick(&configs).clone();
    let cut = rng.below(events.len() + 1);
    let every = 1 + rng.below(40);

    let mut writer = Correlator::new(config.clone());
    let mut changelog = BTreeMap::new();
    check_records(&run(&mut writer, &events[..cut], 0, every, &mut changelog));
    let mut entries: Vec<(String, Vec<u8>)> = changelog
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect();
    damage(&mut rng, &mut entries);

    let Ok(mut restored) = Correlator::restore(config.clone(), entries) else {
        return;
    };
    restored.reserve_seqs(rng.below(2_000) as u64);
    let mut changelog = BTreeMap::new();
    check_records(&run(
        &mut restored,
        &events[cut..],
        cut,
        every,
        &mut changelog,
    ));
    let views: Vec<ToolCallRecord> = restored.pending_views().collect();
    check_records(&views);
    let mut out = Effects::default();
    restored.end_of_input(&mut out);
    check_records(&out.records);

    // What the restored correlator wrote restores in turn (or is refused), and goes on.
    let entries: Vec<(String, Vec<u8>)> = changelog
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect();
    if let Ok(mut again) = Correlator::restore(config, entries) {
        let mut changelog = BTreeMap::new();
        check_records(&run(&mut again, &events[..cut], 0, every, &mut changelog));
    }
}

#[test]
fn a_damaged_changelog_is_refused_or_restored_never_a_panic() {
    let workloads = workloads();
    let budget = fuzz::Budget::from_env(300);
    fuzz::run(
        "restore",
        &budget,
        |rng, _| rng.next_u64().to_le_bytes().to_vec(),
        |input| case(input, &workloads),
    );
}

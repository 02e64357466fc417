//! Fuzzing local mode's path for v1 events: mutated event lines (the README's example session,
//! one event of every kind, the schema examples) are decoded as `toolcalls local` decodes them,
//! what decodes goes through the correlation core (`replay`, with each way of finishing), and
//! every record must encode to JSON that reads back. Nothing may panic.
//!
//! A bounded run is part of `cargo test`; `TOOLCALLS_FUZZ_SECS=600 scripts/fuzz.sh` is the long
//! run (the knobs: `crates/model/tests/support/fuzz.rs`).

#[path = "../../model/tests/support/fuzz.rs"]
mod fuzz;

use std::path::{Path, PathBuf};

use toolcalls_core::{replay, Config, FinishMode};
use toolcalls_model::{Event, ToolCallRecord};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whole files of v1 events to start from.
fn corpus() -> Vec<Vec<u8>> {
    let events = fuzz::v1_events();
    let mut corpus = vec![events.join(&b'\n')];
    // Every kind, with and without ids, twice (repeats), in two sessions.
    let mut doubled = events.clone();
    doubled.extend(events.iter().map(|e| {
        String::from_utf8_lossy(e)
            .replace(r#""session":"s""#, r#""session":"t""#)
            .replace(r#""callId":"c1","#, "")
            .into_bytes()
    }));
    doubled.extend(events.iter().cloned());
    corpus.push(doubled.join(&b'\n'));
    if let Ok(text) = std::fs::read(workspace_root().join("examples/session.jsonl")) {
        corpus.push(text);
    }
    let examples: Vec<Vec<u8>> =
        fuzz::files_under(&workspace_root().join("schemas/examples/valid"))
            .into_iter()
            .filter_map(|p| std::fs::read(p).ok())
            .filter_map(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .map(|v| v.to_string().into_bytes())
            .collect();
    corpus.push(examples.join(&b'\n'));
    corpus
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
        let back: ToolCallRecord = serde_json::from_slice(&encoded).unwrap_or_else(|e| {
            panic!(
                "an encoded record does not read back ({e}): {}",
                String::from_utf8_lossy(&encoded)
            )
        });
        // (`"input": null` reads back as absent: reported, see crates/adapters/tests/fuzz.rs.)
        assert_eq!(back.metadata, record.metadata);
        let mut status = record.status.clone();
        if status
            .output
            .as_ref()
            .is_some_and(|j| j.as_str().trim() == "null")
        {
            status.output = None;
        }
        assert_eq!(back.status, status);
    }
}

/// What `toolcalls local` does with a file of v1 events: each line decoded on its own, bad lines
/// counted, the rest applied in order; then the pending calls closed.
fn local(input: &[u8], config: &Config) {
    let events: Vec<Event> = input
        .split(|&b| b == b'\n')
        .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
        .filter_map(|line| Event::decode(line).ok())
        .collect();
    for finish in [
        FinishMode::Deadlines,
        FinishMode::Interrupt,
        FinishMode::Keep,
    ] {
        let out = replay(config, events.iter().cloned(), finish);
        assert_eq!(out.outcomes.len(), events.len());
        check_records(&out.records);
        check_records(&out.pending);
    }
}

#[test]
fn local_mode_never_panics() {
    let corpus = corpus();
    let odd = fuzz::odd_values();
    let budget = fuzz::Budget::from_env(200);
    let small = Config {
        max_pending: 3,
        ..Config::default()
    };
    fuzz::run(
        "local_mode",
        &budget,
        |rng, _| {
            let base = rng.pick(&corpus).clone();
            fuzz::mutate(rng, &base, &corpus, &odd)
        },
        |input| {
            local(input, &Config::default());
            // A tiny state cap: evictions on every few events.
            local(input, &small);
        },
    );
}

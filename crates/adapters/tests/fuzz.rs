//! Fuzzing every adapter, and what local mode does with its events: mutated native files (the real
//! recordings in `../shared/fixtures`, read in place, and the project's own samples in
//! `tests/data`) go through `parse` for every `Format`; every event it makes must encode and decode
//! again unchanged, the events go through the correlation core (`replay`, as `toolcalls local
//! --format` runs it), and every record must encode to JSON that reads back as the same record.
//! Nothing may panic, and a line format read in pieces (`Stream`) gives what it gives read whole.
//!
//! A bounded run is part of `cargo test`; `TOOLCALLS_FUZZ_SECS=600 scripts/fuzz.sh` is the long
//! run (the knobs: `crates/model/tests/support/fuzz.rs`).

#[path = "../../model/tests/support/fuzz.rs"]
mod fuzz;

use std::path::{Path, PathBuf};

use toolcalls_adapters::{parse, Format, Options, Parsed, Stream};
use toolcalls_core::{replay, Config, FinishMode};
use toolcalls_model::{Event, Timestamp, ToolCallRecord};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The inputs to mutate: the shared recordings (when present) and the project's samples.
fn corpus() -> Vec<(PathBuf, Vec<u8>)> {
    let mut corpus = fuzz::shared_fixtures(&workspace_root(), "adapters fuzz").unwrap_or_default();
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    for path in fuzz::files_under(&samples) {
        if let Ok(bytes) = std::fs::read(&path) {
            corpus.push((path, bytes));
        }
    }
    corpus
}

/// The format a corpus file was written in, by where it lives and what it is called.
fn format_of(path: &Path, bytes: &[u8]) -> Option<Format> {
    let name = path.to_string_lossy();
    Format::detect(&name, &bytes[..bytes.len().min(64 * 1024)])
}

/// A slice of at most `max` bytes of whole lines, for big inputs (a debug build parses a mutated
/// megabyte slowly; the mutations matter, not the length).
fn window(rng: &mut fuzz::Rng, bytes: &[u8], max: usize) -> Vec<u8> {
    if bytes.len() <= max || rng.chance(10) {
        return bytes.to_vec();
    }
    let start = rng.below(bytes.len() - max);
    let start = bytes[start..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(start, |p| start + p + 1);
    let end = (start + max).min(bytes.len());
    let end = bytes[start..end]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(end, |p| start + p);
    bytes[start..end].to_vec()
}

/// `event` as its JSON holds it: times beyond the years RFC 3339 can write (a native time near
/// the end of 9999 plus the lines after it) are written as the nearest it can.
fn written(event: &Event) -> Event {
    let clamp = |t: Timestamp| {
        Timestamp::from_millis(t.millis().clamp(
            Timestamp::MIN_RFC3339.millis(),
            Timestamp::MAX_RFC3339.millis(),
        ))
    };
    let mut e = event.clone();
    e.time = clamp(e.time);
    match &mut e.body {
        toolcalls_model::EventBody::Completion(c) => c.started_at = c.started_at.map(clamp),
        toolcalls_model::EventBody::ExecutionEnd(x) => x.started_at = x.started_at.map(clamp),
        _ => {}
    }
    e
}

fn check_records(records: &[ToolCallRecord]) {
    for record in records {
        let encoded = record.encode();
        let back: ToolCallRecord = serde_json::from_slice(&encoded).unwrap_or_else(|e| {
            panic!(
                "an encoded record does not read back ({e}): {}",
                String::from_utf8_lossy(&encoded)
            )
        });
        // Known, reported: `ToolCallRecord`'s `Deserialize` reads `"input": null` / `"output":
        // null` (args or result that were JSON `null`) as absent. The encoded text is right; the
        // reader in crates/model/src/record/mod.rs needs the `present` rule events have.
        let mut expected = record.clone();
        for json in [&mut expected.spec.input, &mut expected.status.output] {
            if json.as_ref().is_some_and(|j| j.as_str().trim() == "null") {
                *json = None;
            }
        }
        assert_eq!(back, expected, "the record changed through its JSON");
        assert_eq!(back.encode(), expected.encode(), "encoding is not stable");
    }
}

/// A line format read in three pieces gives what it gives read whole.
fn check_in_pieces(format: Format, name: &str, input: &[u8], opts: &Options) {
    let Some(mut stream) = Stream::new(format, name, opts) else {
        return;
    };
    let mut whole = input.to_vec();
    whole.push(b'\n');
    let (a, b) = (whole.len() / 3, 2 * whole.len() / 3);
    let mut pieces = Parsed::default();
    for piece in [&whole[..a], &whole[a..b], &whole[b..]] {
        let p = stream.push(piece);
        pieces.events.extend(p.events);
        pieces.errors.extend(p.errors);
        pieces.skipped += p.skipped;
    }
    assert_eq!(
        pieces,
        parse(format, name, &whole, opts),
        "{format}: read in pieces at {a} and {b}, not as read whole"
    );
}

fn check(format: Format, name: &str, input: &[u8], opts: &Options) {
    check_in_pieces(format, name, input, opts);
    let parsed = parse(format, name, input, opts);
    for error in &parsed.errors {
        let _ = error.to_string();
    }
    for event in &parsed.events {
        let encoded = event.encode();
        let back = Event::decode(&encoded).unwrap_or_else(|e| {
            panic!(
                "{format}: an event does not decode ({e}): {}",
                String::from_utf8_lossy(&encoded)
            )
        });
        assert_eq!(
            back,
            written(event),
            "{format}: the event changed through its JSON"
        );
    }
    for finish in [
        FinishMode::Deadlines,
        FinishMode::Interrupt,
        FinishMode::Keep,
    ] {
        let out = replay(&Config::default(), parsed.events.iter().cloned(), finish);
        check_records(&out.records);
        check_records(&out.pending);
    }
}

#[test]
fn every_adapter_and_local_mode_never_panic() {
    let corpus = corpus();
    assert!(corpus.len() >= 10, "the project's samples are missing");
    let raw: Vec<Vec<u8>> = corpus.iter().map(|(_, b)| b.clone()).collect();
    let formats: Vec<Option<Format>> = corpus.iter().map(|(p, b)| format_of(p, b)).collect();
    let odd = fuzz::odd_values();
    let budget = fuzz::Budget::from_env(400);
    // Each case: one format in turn (so every adapter is fed in every run), an input of its own
    // format most of the time, of another format sometimes, mutated.
    let chosen = std::cell::Cell::new(Format::ALL[0]);
    let options = std::cell::RefCell::new(Options::default());
    fuzz::run(
        "adapters",
        &budget,
        |rng, case| {
            let format = Format::ALL[(case % Format::ALL.len() as u64) as usize];
            chosen.set(format);
            *options.borrow_mut() = Options {
                drop_ids: rng.chance(30),
                source: rng.chance(10).then(|| "fuzz".to_owned()),
                session: rng.chance(10).then(|| "fuzz-session".to_owned()),
                // `--base-time` is RFC 3339: within the years 0000–9999.
                base_time: rng.chance(20).then(|| {
                    let span =
                        (Timestamp::MAX_RFC3339.millis() - Timestamp::MIN_RFC3339.millis()) as u64;
                    Timestamp::from_millis(
                        Timestamp::MIN_RFC3339.millis() + (rng.next_u64() % span) as i64,
                    )
                }),
            };
            let own: Vec<usize> = (0..corpus.len())
                .filter(|&i| formats[i] == Some(format))
                .collect();
            let i = if own.is_empty() || rng.chance(20) {
                rng.below(corpus.len())
            } else {
                *rng.pick(&own)
            };
            let base = window(rng, &raw[i], 48 * 1024);
            fuzz::mutate(rng, &base, &raw, &odd)
        },
        |input| check(chosen.get(), "fuzz-input.jsonl", input, &options.borrow()),
    );
}

#[test]
fn unmutated_inputs_pass_every_check() {
    // The starting points themselves, through every format (most are the wrong one).
    for (path, bytes) in corpus() {
        for format in Format::ALL {
            check(format, &path.to_string_lossy(), &bytes, &Options::default());
        }
    }
}

//! `toolcalls audit` fed mutated records files and inputs, as a user would run it after a
//! `toolcalls local` run: records cut, spliced, repeated, with odd values in every field (the
//! provenance's files and lines included), and inputs changed under them. The audit must never
//! panic: it answers 0 (all accounted for), 1 (discrepancies, named) or 2 (an input it cannot
//! read), whatever it is given.
//!
//! Each case starts a process, so the bounded run in `cargo test` is a few dozen cases;
//! `scripts/fuzz.sh` is the long run.

#[path = "../crates/model/tests/support/fuzz.rs"]
mod fuzz;

#[path = "support/scratch.rs"]
mod scratch;

use scratch::Scratch;
use std::path::Path;
use std::process::{Command, Output};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn toolcalls(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolcalls"));
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("TOOLCALLS_") {
            command.env_remove(var);
        }
    }
    command.args(args).output().expect("run toolcalls")
}

/// One audited run: its format, its input, and the records `toolcalls local` wrote of it.
struct Run {
    format: &'static str,
    input: Vec<u8>,
    records: Vec<u8>,
}

fn runs(dir: &Path) -> Vec<Run> {
    let mut inputs = vec![(
        "v1",
        std::fs::read(root().join("examples/session.jsonl")).unwrap(),
    )];
    for (format, sample) in [
        ("claude-code", "claude-subagent-agent-a3f9c1e.jsonl"),
        ("codex", "codex-rollout-custom-tools.jsonl"),
        ("claude-code-hooks", "claude-hooks.jsonl"),
    ] {
        let bytes = std::fs::read(root().join("crates/adapters/tests/data").join(sample)).unwrap();
        inputs.push((format, bytes));
    }
    inputs
        .into_iter()
        .map(|(format, input)| {
            let (file, records) = (dir.join("input.jsonl"), dir.join("records.jsonl"));
            std::fs::write(&file, &input).unwrap();
            let out = toolcalls(&[
                "local",
                "-q",
                "--format",
                format,
                "-o",
                records.to_str().unwrap(),
                file.to_str().unwrap(),
            ]);
            assert!(
                out.status.code().is_some_and(|c| c <= 2),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let records = std::fs::read(&records).unwrap();
            assert!(!records.is_empty(), "{format}: no records to audit");
            Run {
                format,
                input,
                records,
            }
        })
        .collect()
}

#[test]
fn toolcalls_audit_never_panics() {
    let dir = Scratch::new("fuzz-audit");
    let runs = runs(&dir);
    for run in &runs {
        assert_eq!(
            audit(&dir, run.format, &run.input, &run.records),
            Some(0),
            "{}: the unmutated run passes the audit",
            run.format
        );
    }
    let records: Vec<Vec<u8>> = runs.iter().map(|r| r.records.clone()).collect();
    let inputs: Vec<Vec<u8>> = runs.iter().map(|r| r.input.clone()).collect();
    let odd = fuzz::odd_values();
    let budget = fuzz::Budget::from_env(40);
    // The case's run and what was mutated, for the check.
    let case_of = std::cell::Cell::new((0usize, false));
    fuzz::run(
        "toolcalls_audit",
        &budget,
        |rng, case| {
            let run = (case % runs.len() as u64) as usize;
            let mutate_input = rng.chance(30);
            case_of.set((run, mutate_input));
            if mutate_input {
                fuzz::mutate(rng, &runs[run].input, &inputs, &odd)
            } else {
                fuzz::mutate(rng, &runs[run].records, &records, &odd)
            }
        },
        |mutated| {
            let (run, mutate_input) = case_of.get();
            let run = &runs[run];
            let (input, records) = if mutate_input {
                (mutated, &run.records[..])
            } else {
                (&run.input[..], mutated)
            };
            audit(&dir, run.format, input, records);
        },
    );
}

/// Audits `records` against `input`; the exit code.
fn audit(dir: &Path, format: &str, input: &[u8], records: &[u8]) -> Option<i32> {
    let (file, records_file) = (dir.join("input.jsonl"), dir.join("records.jsonl"));
    std::fs::write(&file, input).unwrap();
    std::fs::write(&records_file, records).unwrap();
    let mut args = vec!["audit", "--quiet"];
    if format != "v1" {
        args.extend(["--format", format]);
    }
    args.extend([
        file.to_str().unwrap(),
        "--records",
        records_file.to_str().unwrap(),
    ]);
    let out = toolcalls(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code().is_some_and(|c| c <= 2) && !stderr.contains("panicked"),
        "toolcalls {args:?} ({}): {}",
        out.status,
        stderr.chars().take(2000).collect::<String>()
    );
    out.status.code()
}

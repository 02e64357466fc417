//! `toolcalls local` fed mutated inputs, as a user would run it: v1 event files and native files
//! (the real recordings in `../shared/fixtures` when present, the adapters' own samples), each
//! with a random `--format` and one to three threads. The binary must never panic (exit 101): bad
//! lines are reported and counted, the rest correlated.
//!
//! Each case starts a process, so the bounded run in `cargo test` is a few dozen cases; the fuzz
//! tests of the crates (`crates/model`, `crates/adapters`, `crates/core` `tests/fuzz*.rs`) drive
//! the same code in-process, thousands of cases a second. `TOOLCALLS_FUZZ_SECS=600
//! scripts/fuzz.sh` is the long run.

#[path = "../crates/model/tests/support/fuzz.rs"]
mod fuzz;

#[path = "support/scratch.rs"]
mod scratch;

use scratch::Scratch;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `v1`, `auto`, then every adapter's format (so a new adapter is fuzzed without a change here).
fn formats() -> Vec<&'static str> {
    ["v1", "auto"]
        .into_iter()
        .chain(toolcalls_adapters::Format::ALL.iter().map(|f| f.name()))
        .collect()
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn corpus() -> Vec<Vec<u8>> {
    let mut corpus = vec![fuzz::v1_events().join(&b'\n')];
    if let Ok(text) = std::fs::read(root().join("examples/session.jsonl")) {
        corpus.push(text);
    }
    for path in fuzz::files_under(&root().join("crates/adapters/tests/data")) {
        corpus.extend(std::fs::read(path).ok());
    }
    if let Some(files) = fuzz::shared_fixtures(root(), "toolcalls local fuzz") {
        // The small ones: a process per case reads the whole input.
        corpus.extend(
            files
                .into_iter()
                .map(|(_, bytes)| bytes)
                .filter(|b| b.len() < 256 * 1024),
        );
    }
    corpus
}

#[test]
fn toolcalls_local_never_panics() {
    let corpus = corpus();
    let odd = fuzz::odd_values();
    let budget = fuzz::Budget::from_env(60);
    let dir = Scratch::new("fuzz-local");
    let formats = formats();
    let format = std::cell::Cell::new("v1");
    fuzz::run(
        "toolcalls_local",
        &budget,
        |rng, case| {
            format.set(formats[(case % formats.len() as u64) as usize]);
            let base = rng.pick(&corpus).clone();
            fuzz::mutate(rng, &base, &corpus, &odd)
        },
        |input| run_local(&dir, format.get(), input),
    );
}

fn run_local(dir: &Path, format: &str, input: &[u8]) {
    // Half the time from a file (the format detected from its name and first bytes), half on
    // stdin.
    let file: PathBuf = dir.join("input.jsonl");
    std::fs::write(&file, input).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolcalls"));
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("TOOLCALLS_") {
            command.env_remove(var);
        }
    }
    // One correlator or several, whatever the machine's cores (several split lines by session
    // before decoding them).
    let threads = (input.len() / 2 % 3 + 1).to_string();
    command.args(["local", "--format", format, "--threads", &threads]);
    let from_stdin = input.len() % 2 == 0;
    if !from_stdin {
        command.arg(&file);
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run toolcalls");
    if from_stdin {
        let _ = child.stdin.take().unwrap().write_all(input);
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() != Some(101) && !stderr.contains("panicked"),
        "toolcalls local --format {format} --threads {threads} panicked ({}): {}",
        out.status,
        stderr.chars().take(2000).collect::<String>()
    );
    // Whatever it printed on stdout is records, one JSON object a line.
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        serde_json::from_str::<serde::de::IgnoredAny>(line)
            .unwrap_or_else(|e| panic!("stdout holds a line that is not JSON ({e}): {line}"));
    }
}

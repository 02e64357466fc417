//! A backfill gets the phases a live run gets: real transcripts from different months, published
//! in parallel with `toolcalls ingest` (one producer per file, as an operator importing last
//! month's sessions runs them) to a fresh processor with the default settings, give the records
//! `toolcalls local` gives on each file alone. Each session keeps its own clock
//! (docs/ARCHITECTURE.md, Correlation → Time), so sessions months apart that share a partition do
//! not time each other out.

use crate::harness::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use toolcalls_model::ToolCallRecord;

/// Fixtures of four frameworks, from September 2025 to 2026.
const FILES: [(&str, &str); 7] = [
    (
        "claude-code",
        "claude-code/agentcmd-full-session-four.jsonl",
    ),
    ("claude-code", "claude-code/agentcmd-full-session-two.jsonl"),
    ("claude-code", "claude-code/spotter-tool-heavy.jsonl"),
    ("codex", "codex/agentcmd-rollout-01997e76.jsonl"),
    ("codex", "codex/agentcmd-rollout-01997ea4.jsonl"),
    ("gemini-cli", "gemini-cli/agentcmd-session-981c87cb.json"),
    ("gemini-cli", "gemini-cli/agentcmd-session-453aa339.json"),
];

/// A record as the two runs can compare it: everything but where its inputs were read from.
fn comparable(r: &ToolCallRecord) -> (String, String) {
    let mut r = r.clone();
    r.provenance = Default::default();
    let key = format!(
        "{}/{}/{}",
        r.metadata.source, r.metadata.session, r.correlation.key
    );
    (key, serde_json::to_string(&r).unwrap())
}

/// `toolcalls local` on one file, with `--at-end MODE`.
fn local(format: &str, path: &Path, at_end: &str) -> BTreeMap<String, String> {
    let path = path.to_str().expect("a UTF-8 path");
    toolcalls_ok(&["local", "-q", "--format", format, "--at-end", at_end, path])
        .lines()
        .map(|l| comparable(&serde_json::from_str(l).expect("a record")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_of_sessions_from_different_months_gets_the_phases_of_local_mode() {
    let root = workspace_root().join("../shared/fixtures");
    if !root.exists() {
        eprintln!(
            "SKIPPED: {} is missing; this test reads the shared fixtures beside the project",
            root.display()
        );
        return;
    }
    let mut s = settings("backfill");
    s.core = toolcalls_core::Config::default();
    // Two partitions for seven sessions: sessions months apart share one.
    create_topics(&s, 2).await;

    // What each file gives alone: the records closed while reading it, and those its end closes.
    let (mut during, mut with_end) = (BTreeMap::new(), BTreeMap::new());
    for (format, file) in FILES {
        let path = root.join(file);
        during.extend(local(format, &path, "keep"));
        with_end.extend(local(format, &path, "deadlines"));
    }

    // Every file published at once, each by its own `toolcalls ingest`.
    let producers: Vec<_> = FILES
        .iter()
        .map(|(format, file)| {
            Command::new(env!("CARGO_BIN_EXE_toolcalls"))
                .env_clear()
                .args(["ingest", "-q", "--format", format, "--brokers", &s.brokers])
                .args(["--announce-topic", &s.topics.announce])
                .args(["--completion-topic", &s.topics.completion])
                .arg(root.join(file))
                .stderr(Stdio::piped())
                .spawn()
                .expect("toolcalls ingest")
        })
        .collect();
    for p in producers {
        let out = p.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let inputs =
        (read_to_end(&s.topics.announce).len() + read_to_end(&s.topics.completion).len()) as i64;

    let _running = Proc::spawn(&s, "i0", None);
    wait_inputs_committed(&s, inputs).await;
    let topic = s.topics.records.clone();
    let published: BTreeMap<String, String> =
        tokio::task::spawn_blocking(move || read_to_end(&topic))
            .await
            .unwrap()
            .iter()
            .map(|m| comparable(&serde_json::from_slice(m.payload.as_deref().unwrap()).unwrap()))
            .collect();

    // Every record a file closes while it is read, the backfill publishes, the same; and what else
    // it publishes is what the end of that file closes (a session gone quiet, once idle).
    let mut problems = Vec::new();
    for (key, record) in &during {
        match published.get(key) {
            Some(p) if p == record => {}
            Some(p) => problems.push(format!("{key}: local {record}\n  backfill {p}")),
            None => problems.push(format!("{key}: missing from the backfill")),
        }
    }
    for (key, record) in &published {
        if !during.contains_key(key) && with_end.get(key) != Some(record) {
            problems.push(format!("{key}: the backfill published {record}"));
        }
    }
    assert!(during.len() > 150, "{} records", during.len());
    assert!(
        problems.is_empty(),
        "{} differences:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

//! The reorder window in the processor: real transcripts with their ids stripped and each result
//! delayed in arrival by up to two positions, published to a processor run with
//! `--max-disorder` as wide as that disorder, pair every call as `toolcalls local` pairs it with
//! the ids (docs/ARCHITECTURE.md, Correlation → Disorder). The last events of each session wait
//! the window's length of wall clock; the test waits for them.

use crate::harness::*;
use crate::scratch::Scratch;
use std::path::Path;
use toolcalls_model::{Event, ToolCallRecord};
use toolcalls_workload::{delay_results, disorder_ms};

/// Two fixtures whose delayed results mispair in arrival order, with a disorder of seconds.
const FILES: [(&str, &str); 2] = [
    ("codex", "codex/agentcmd-rollout-01997ea4.jsonl"),
    ("claude-code", "claude-code/agentcmd-full-session-two.jsonl"),
];

/// The events `ingest` makes of a fixture, with or without ids.
fn events(format: &str, path: &Path, out: &Path, drop_ids: bool) -> Vec<String> {
    let mut args = vec![
        "ingest",
        "-q",
        "--format",
        format,
        "--out",
        out.to_str().unwrap(),
        path.to_str().unwrap(),
    ];
    if drop_ids {
        args.push("--drop-ids");
    }
    toolcalls_ok(&args);
    std::fs::read_to_string(out)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// What pairing decides of a record: which call, which result (ids and strategy aside).
fn pairing(r: &ToolCallRecord) -> String {
    let v = serde_json::to_value(r).unwrap();
    serde_json::json!([
        v["metadata"]["session"],
        v["spec"]["toolRef"]["name"],
        v["spec"]["input"],
        v["createdAt"],
        v["status"]["phase"],
        v["status"]["completedAt"],
        v["status"]["output"],
        v["status"]["isError"],
    ])
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jittered_id_less_fixtures_pair_as_the_ids_would() {
    let root = workspace_root().join("../shared/fixtures");
    if !root.exists() {
        eprintln!(
            "SKIPPED: {} is missing; this test reads the shared fixtures beside the project",
            root.display()
        );
        return;
    }
    let dir = Scratch::new("disorder");
    let mut truth = Vec::new();
    let mut jittered = Vec::new();
    let mut window = 1;
    for (i, (format, file)) in FILES.iter().enumerate() {
        let path = root.join(file);
        let ids = dir.join(format!("ids-{i}.jsonl"));
        events(format, &path, &ids, false);
        // The records the ids give, closed while the file is read.
        truth.extend(
            toolcalls_ok(&["local", "-q", "--at-end", "keep", ids.to_str().unwrap()])
                .lines()
                .map(|l| pairing(&serde_json::from_str(l).unwrap())),
        );
        let without: Vec<Event> = events(format, &path, &dir.join("noids.jsonl"), true)
            .iter()
            .map(|l| Event::decode(l.as_bytes()).unwrap())
            .collect();
        let order = delay_results(&without, 2, 1);
        window = window.max(disorder_ms(&without, &order));
        jittered.extend(order.into_iter().map(|i| without[i].clone()));
    }
    truth.sort();
    assert!(truth.len() > 20, "{} records", truth.len());

    let mut s = settings("disorder");
    s.core.max_disorder_ms = window;
    create_topics(&s, 2).await;
    produce_events(&s, &jittered);
    let _running = Proc::spawn(&s, "i0", None);
    let topic = s.topics.records.clone();
    let n = truth.len();
    let mut published: Vec<String> = read_at_least(&topic, n)
        .await
        .iter()
        .map(|m| pairing(&serde_json::from_slice(m.payload.as_deref().unwrap()).unwrap()))
        .collect();
    published.sort();
    let missing: Vec<_> = truth.iter().filter(|r| !published.contains(r)).collect();
    let extra: Vec<_> = published.iter().filter(|r| !truth.contains(r)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "--max-disorder {window}ms: {} records paired otherwise than the ids pair them:\n{missing:#?}\npublished instead:\n{extra:#?}",
        missing.len()
    );
}

/// Events the window holds are in the changelog: `toolcalls audit` counts them as pending, and
/// the ledger is complete while they wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_accounts_for_held_events() {
    let mut s = settings("held");
    s.core.max_disorder_ms = 3_600_000;
    create_topics(&s, 2).await;
    let (announces, completions) = synth("held", 2, 3);
    produce_events(&s, &announces);
    produce_events(&s, &completions);
    let mut proc = Proc::spawn(&s, "i0", None);
    wait_inputs_committed(&s, 12).await;
    assert!(proc.terminate().success(), "the processor exits cleanly");

    let args = audit_args(&s, &s.topics.records, &s.topics.dlq);
    let stdout = tokio::task::spawn_blocking(move || toolcalls_ok(&args))
        .await
        .unwrap();
    for part in [
        "0 records",
        "held:     12 events",
        ", 12 pending,",
        "ok: every input is accounted for",
    ] {
        assert!(stdout.contains(part), "{part}: {stdout}");
    }
}

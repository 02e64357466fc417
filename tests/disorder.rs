//! The reorder window (`--max-disorder`) on the real fixtures: with ids stripped and each result
//! delayed in arrival by up to two positions (its time intact), `toolcalls local` pairs every
//! call as the ids pair it in arrival order.

#[path = "support/scratch.rs"]
mod scratch;

use scratch::Scratch;
use std::path::{Path, PathBuf};
use std::process::Command;
use toolcalls_model::{Event, ToolCallRecord};
use toolcalls_workload::{delay_results, disorder_ms};

fn fixtures() -> Option<Vec<PathBuf>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures");
    if !root.is_dir() {
        println!(
            "skipped: {} is missing (the shared fixtures live beside the project)",
            root.display()
        );
        return None;
    }
    let mut files = Vec::new();
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        if dir.is_dir() {
            for f in std::fs::read_dir(&dir).unwrap() {
                files.push(f.unwrap().path());
            }
        }
    }
    files.sort();
    Some(files)
}

fn scratch_dir(test: &str) -> Scratch {
    Scratch::new(test)
}

fn toolcalls(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_toolcalls"))
        .env_clear()
        .args(args)
        .output()
        .expect("run toolcalls");
    assert!(
        out.status.success(),
        "toolcalls {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The v1 events of a native file, with or without their ids.
fn events(file: &Path, dir: &Path, drop_ids: bool) -> Vec<String> {
    let out = dir.join(if drop_ids { "noids.jsonl" } else { "ids.jsonl" });
    let mut args = vec![
        "ingest",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "-q",
    ];
    if drop_ids {
        args.push("--drop-ids");
    }
    toolcalls(&args);
    std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Each record as the input lines merged into it (numbered from 1 in `order`, mapped back
/// through it to the lines of the events as the adapter wrote them), sorted.
fn pairs(lines: &[String], order: &[usize], dir: &Path, window: &str) -> Vec<Vec<usize>> {
    let input = dir.join("input.jsonl");
    let text: String = order.iter().map(|&i| format!("{}\n", lines[i])).collect();
    std::fs::write(&input, text).unwrap();
    let out = toolcalls(&[
        "local",
        input.to_str().unwrap(),
        "--max-disorder",
        window,
        "-q",
    ]);
    let mut pairs: Vec<Vec<usize>> = out
        .lines()
        .map(|l| {
            let record: ToolCallRecord = serde_json::from_str(l).unwrap();
            let value = serde_json::to_value(&record.provenance).unwrap();
            let mut merged: Vec<usize> = value[0]["lines"]
                .as_array()
                .unwrap_or_else(|| panic!("provenance of one file: {value}"))
                .iter()
                .map(|n| order[n.as_u64().unwrap() as usize - 1])
                .collect();
            merged.sort_unstable();
            merged
        })
        .collect();
    pairs.sort();
    pairs
}

#[test]
fn jittered_id_less_fixtures_pair_as_the_ids_would() {
    let Some(files) = fixtures() else { return };
    let dir = scratch_dir("disorder");
    let mut mispaired_without = 0;
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let with_ids = events(file, &dir, false);
        let without = events(file, &dir, true);
        assert_eq!(
            with_ids.len(),
            without.len(),
            "{name}: same events either way"
        );
        let in_order: Vec<usize> = (0..with_ids.len()).collect();
        let decoded: Vec<Event> = without
            .iter()
            .map(|l| Event::decode(l.as_bytes()).unwrap())
            .collect();
        let truth = pairs(&with_ids, &in_order, &dir, "0");
        for seed in 1..=3u64 {
            let order = delay_results(&decoded, 2, seed);
            let window = disorder_ms(&decoded, &order).max(1);
            let plain = pairs(&without, &order, &dir, "0");
            let windowed = pairs(&without, &order, &dir, &format!("{window}ms"));
            // A window wider than the disorder costs latency, never pairs.
            let wide = pairs(&without, &order, &dir, "1h");
            assert_eq!(wide, windowed, "{name}, seed {seed}: --max-disorder 1h");
            let same = |p: &Vec<Vec<usize>>| p.iter().filter(|x| truth.contains(x)).count();
            println!(
                "{name} seed {seed}: {} records; in arrival order {} pair as the ids do, with --max-disorder {window}ms {}",
                truth.len(),
                same(&plain),
                same(&windowed)
            );
            if plain != truth {
                mispaired_without += 1;
            }
            assert_eq!(
                windowed, truth,
                "{name}, seed {seed}: with --max-disorder {window}ms the id-less jittered input pairs otherwise than the ids"
            );
        }
    }
    assert!(
        mispaired_without > 0,
        "arrival order paired every jittered input as the ids do: the test shows nothing"
    );
}

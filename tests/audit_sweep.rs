//! `toolcalls audit` against generated genuine runs, as a user runs it after `toolcalls local`:
//! calls with and without ids over sessions and threads, results before their announce, hints of
//! every kind (tool, arguments, checksum, none), facts, copies near and far, idempotent retries
//! with and without ids, turn ends, calls that never finish, bad lines, bounded disorder, the
//! input cut into files. Every such run must audit clean, with its files in either order; and with
//! every revision of one of its records taken out, the audit must fail.
//!
//! Each case runs the binary a few times, so the bounded run in `cargo test` is a few dozen cases;
//! `scripts/fuzz.sh` runs it for as long as the other fuzz tests. A failing case prints its seed
//! and saves the case (options and files, as JSON) under the target directory.

#[path = "../crates/model/tests/support/fuzz.rs"]
mod fuzz;
#[path = "support/piped.rs"]
mod piped;
#[path = "support/scratch.rs"]
mod scratch;

use fuzz::Rng;
use piped::{run_piped, Ran};
use scratch::Scratch;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Runs `toolcalls ARGS` (none of the caller's `TOOLCALLS_*` variables), killed after a minute.
fn toolcalls(args: &[&str]) -> Ran {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolcalls"));
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("TOOLCALLS_") {
            command.env_remove(var);
        }
    }
    command.args(args);
    run_piped(
        command,
        &format!("toolcalls {args:?}"),
        Duration::from_secs(60),
    )
}

/// One input line and where it goes in the input: lines are ordered by `order`, then by `n`.
struct Line {
    order: i64,
    n: usize,
    text: String,
}

/// What one scope's calls produce, event by event, in event time.
struct Gen<'a> {
    rng: &'a mut Rng,
    lines: Vec<Line>,
}

impl Gen<'_> {
    fn push(&mut self, order: i64, event: Value) {
        let n = self.lines.len();
        let text = event.to_string();
        // A copy of the event, delivered again soon or long after (once its record is out).
        if self.rng.chance(8) {
            let later = order + self.rng.below(4_000) as i64;
            self.lines.push(Line {
                order: later,
                n: n + 1_000_000,
                text: text.clone(),
            });
        }
        self.lines.push(Line { order, n, text });
    }
}

fn time(ms: i64) -> String {
    toolcalls_model::Timestamp::from_millis(1_767_225_600_000 + ms).to_rfc3339()
}

/// The envelope of an event of scope (`session`, `thread`) at `at` ms.
fn envelope(kind: &str, session: &str, thread: Option<&str>, at: i64) -> Value {
    let mut e =
        json!({"v": 1, "kind": kind, "source": "gen", "session": session, "time": time(at)});
    if let Some(thread) = thread {
        e["thread"] = json!(thread);
    }
    e
}

/// A generated case: the `toolcalls local` options and the input files' lines.
fn generate(rng: &mut Rng) -> Value {
    let option = *rng.pick(&["", "--max-disorder=10s"]);
    let mut gen = Gen {
        rng,
        lines: Vec::new(),
    };
    let sessions = 1 + gen.rng.below(2);
    for s in 0..sessions {
        let session = format!("S{s}");
        let threads: Vec<Option<String>> = if gen.rng.chance(30) {
            vec![Some("T0".into()), Some("T1".into())]
        } else {
            vec![None]
        };
        for thread in &threads {
            scope(&mut gen, &session, thread.as_deref());
        }
    }
    if gen.rng.chance(10) {
        let order = gen.rng.below(20_000) as i64;
        let n = gen.lines.len();
        gen.lines.push(Line {
            order,
            n,
            text: r#"{"v":1,"kind":"announce","source":"gen"#.into(),
        });
    }
    let Gen { rng, mut lines } = gen;
    lines.sort_by_key(|l| (l.order, l.n));
    // Bounded disorder beyond what the event times say: neighbours swapped.
    for _ in 0..rng.below(lines.len() / 3 + 1) {
        let i = rng.below(lines.len().saturating_sub(1));
        lines.swap(i, i + 1);
    }
    let texts: Vec<String> = lines.into_iter().map(|l| l.text).collect();
    let files = 1 + rng.below(3).min(texts.len().saturating_sub(1));
    let mut cuts: Vec<usize> = (1..files).map(|_| 1 + rng.below(texts.len() - 1)).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut parts = Vec::new();
    let mut start = 0;
    for cut in cuts.into_iter().chain([texts.len()]) {
        parts.push(texts[start..cut].to_vec());
        start = cut;
    }
    json!({"option": option, "files": parts})
}

/// The calls of one scope.
fn scope(gen: &mut Gen, session: &str, thread: Option<&str>) {
    let ev = |kind: &str, at: i64| envelope(kind, session, thread, at);
    let turns = gen.rng.chance(50);
    let calls = 1 + gen.rng.below(6);
    let mut at = gen.rng.below(1_000) as i64;
    for c in 0..calls {
        at += 100 + gen.rng.below(2_000) as i64;
        let turn = turns.then(|| format!("r{}", c / 3));
        let with_turn = |mut e: Value| {
            if let Some(turn) = &turn {
                e["turn"] = json!(turn);
            }
            e
        };
        let tool = *gen.rng.pick(&["t", "u"]);
        let args = json!({"a": gen.rng.below(2)});
        let id = gen.rng.chance(70).then(|| format!("c{c}"));
        let key = gen.rng.chance(20).then(|| format!("K{}", gen.rng.below(2)));
        let checksum = toolcalls_model::checksum_of(tool, Some(&args));

        let mut announce = with_turn(ev("announce", at));
        announce["tool"] = json!(tool);
        announce["args"] = args.clone();
        if let Some(id) = &id {
            announce["callId"] = json!(id);
        }
        if let Some(key) = &key {
            announce["sideEffects"] = json!({"idempotencyKey": key});
        }
        gen.push(at, announce);

        // Facts: a hook decision, an approval, an execution's start and end.
        let name_call = |e: &mut Value, rng: &mut Rng| match &id {
            Some(id) => e["callId"] = json!(id),
            None if rng.chance(50) => e["checksum"] = json!(checksum.as_str()),
            None => e["tool"] = json!(tool),
        };
        if gen.rng.chance(15) {
            let mut d = with_turn(ev("hook_decision", at + 10));
            d["hook"] = json!("pre");
            d["decision"] = json!("allow");
            name_call(&mut d, gen.rng);
            gen.push(at + 10, d);
        }
        if gen.rng.chance(10) {
            let mut a = with_turn(ev("approval", at + 20));
            a["decision"] = json!(*gen.rng.pick(&["requested", "approved", "denied"]));
            name_call(&mut a, gen.rng);
            gen.push(at + 20, a);
        }
        if gen.rng.chance(10) {
            for (kind, dt) in [("execution_start", 30), ("execution_end", 40)] {
                let mut x = with_turn(ev(kind, at + dt));
                x["checksum"] = json!(checksum.as_str());
                gen.push(at + dt, x);
            }
        }

        // The result, unless the call never finishes; sometimes before its announce.
        if !gen.rng.chance(5) {
            let done_at = at + 50 + gen.rng.below(450) as i64;
            let mut r = with_turn(ev("completion", done_at));
            r["result"] = json!(format!("r{}", gen.rng.below(3)));
            if gen.rng.chance(25) {
                r["isError"] = json!(true);
            }
            match &id {
                Some(id) => r["callId"] = json!(id),
                None => match gen.rng.below(100) {
                    0..50 => r["tool"] = json!(tool),
                    50..70 => {
                        r["tool"] = json!(tool);
                        r["args"] = args.clone();
                    }
                    70..85 => r["checksum"] = json!(checksum.as_str()),
                    _ => {}
                },
            }
            let order = if gen.rng.chance(15) { at - 1 } else { done_at };
            gen.push(order, r);
        }

        // An idempotent retry, with its own id or none, and its result.
        if let Some(key) = key.filter(|_| gen.rng.chance(40)) {
            let retry_at = at + 600 + gen.rng.below(400) as i64;
            let mut retry = with_turn(ev("announce", retry_at));
            // Now and then under another tool's name: the key, not the tool, makes it a retry.
            let retry_tool = if gen.rng.chance(15) { "v" } else { tool };
            retry["tool"] = json!(retry_tool);
            retry["args"] = args.clone();
            retry["sideEffects"] = json!({"idempotencyKey": key});
            let retry_id = gen.rng.chance(70).then(|| format!("c{c}r"));
            if let Some(id) = &retry_id {
                retry["callId"] = json!(id);
            }
            gen.push(retry_at, retry);
            let mut r = with_turn(ev("completion", retry_at + 50));
            r["result"] = json!("retried");
            match &retry_id {
                Some(id) => r["callId"] = json!(id),
                None if gen.rng.chance(70) => r["tool"] = json!(retry_tool),
                None => {}
            }
            gen.push(retry_at + 50, r);
        }

        if turns && c % 3 == 2 && gen.rng.chance(50) {
            let end = with_turn(ev("turn_end", at + 700));
            gen.push(at + 700, end);
        }
        at += 1_000;
    }
}

/// The lines of `records` without those of record `id`.
fn without_record(records: &str, id: &str) -> String {
    records
        .lines()
        .filter(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            r["metadata"]["name"] != json!(id)
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

fn check(dir: &Path, case: &[u8]) {
    let case: Value = serde_json::from_slice(case).unwrap();
    let files: Vec<PathBuf> = case["files"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, lines)| {
            let path = dir.join(format!("in{i}.jsonl"));
            let text: String = lines
                .as_array()
                .unwrap()
                .iter()
                .map(|l| format!("{}\n", l.as_str().unwrap()))
                .collect();
            std::fs::write(&path, text).unwrap();
            path
        })
        .collect();
    let names: Vec<&str> = files.iter().map(|p| p.to_str().unwrap()).collect();
    let records = dir.join("records.jsonl");
    let dead = dir.join("dead.jsonl");
    let (records_arg, dead_arg) = (records.to_str().unwrap(), dead.to_str().unwrap());
    let mut local = vec!["local", "-q"];
    local.extend(case["option"].as_str().unwrap().split_whitespace());
    local.extend(&names);
    local.extend(["-o", records_arg, "--dead-letters", dead_arg]);
    let out = toolcalls(&local);
    assert_eq!(out.code, 0, "{}", out.show());

    let audit = |names: &[&str], records: &str| {
        let mut args = vec!["audit"];
        args.extend(names);
        args.extend(["--records", records, "--dead-letters", dead_arg]);
        toolcalls(&args)
    };
    let out = audit(&names, records_arg);
    assert_eq!(out.code, 0, "a genuine run: {}", out.show());
    let reversed: Vec<&str> = names.iter().rev().copied().collect();
    let out = audit(&reversed, records_arg);
    assert_eq!(out.code, 0, "files reversed: {}", out.show());

    // Every revision of one record taken out: its events are accounted for nowhere.
    let text = std::fs::read_to_string(&records).unwrap();
    let ids: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["metadata"]["name"].to_string())
        .collect();
    if ids.is_empty() {
        return;
    }
    let pick = text.len() % ids.len();
    let id: String = serde_json::from_str(&ids[pick]).unwrap();
    let cut = dir.join("cut.jsonl");
    std::fs::write(&cut, without_record(&text, &id)).unwrap();
    let out = audit(&names, cut.to_str().unwrap());
    assert_eq!(out.code, 1, "record {id} taken out: {}", out.show());
}

#[test]
fn genuine_runs_audit_clean_and_a_record_taken_out_is_found() {
    let dir = Scratch::new("audit-sweep");
    let budget = fuzz::Budget::from_env(40);
    fuzz::run(
        "audit_sweep",
        &budget,
        |rng, _| generate(rng).to_string().into_bytes(),
        |case| check(&dir, case),
    );
}

//! `toolcalls audit` driven as a user drives it: after a clean `toolcalls local` run (generated v1
//! events with repeats, early results, facts, retries and a bad line; the real recordings in
//! `../shared/fixtures` through `--format`) and a clean processor run against the real broker
//! (Tansu: records, dead letters, calls still pending in the changelog), it passes; with a record
//! removed, a dead letter removed, or a record published twice with different content, it fails
//! and names the position and the record.
//!
//! Every wait is bounded: the broker's through the processor test harness (`WAIT`), each command
//! run by [`run`].

#[path = "processor/harness.rs"]
#[allow(dead_code)]
mod harness;
#[path = "support/piped.rs"]
mod piped;
#[path = "support/scratch.rs"]
mod scratch;

use harness::*;
use piped::{run_piped, Ran};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer};
use scratch::Scratch;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use toolcalls_model::{Event, ToolCallRecord};

/// Runs `toolcalls ARGS` (none of the caller's `TOOLCALLS_*` variables), killed after [`WAIT`].
fn run(args: &[&str]) -> Ran {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolcalls"));
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("TOOLCALLS_") {
            command.env_remove(var);
        }
    }
    command.args(args);
    run_piped(command, &format!("toolcalls {args:?}"), WAIT)
}

/// A fresh directory of this test run, named after the test.
fn scratch_dir(test: &str) -> Scratch {
    Scratch::new(&format!("audit-{test}"))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn time(ms: i64) -> String {
    toolcalls_model::Timestamp::from_millis(1_767_225_600_000 + ms).to_rfc3339()
}

/// Generated v1 events in arrival order: calls with and without ids over several sessions,
/// results before and after their announce, repeated announces and results (some after the
/// record was published), approvals and hook decisions, an idempotent retry, identical id-less
/// calls in one turn, a turn end, a result whose call never comes, and one bad line.
fn generated_events(calls: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut late = Vec::new();
    for i in 0..calls {
        let session = format!("sess-{}", i % 5);
        let turn = format!("turn-{}", i / 10);
        let at = (i as i64) * 1_000;
        let with_id = i % 4 != 0;
        let id = if with_id {
            format!(r#""callId":"toolu_{i:05}","#)
        } else {
            String::new()
        };
        // Identical id-less calls in one turn: the same tool and arguments every tenth call.
        let args = if !with_id && i % 20 == 0 {
            r#"{"path":"/same"}"#.to_owned()
        } else {
            format!(r#"{{"path":"/src/{i}.rs"}}"#)
        };
        let announce = format!(
            r#"{{"v":1,"kind":"announce","source":"gen","session":"{session}","turn":"{turn}",{id}"time":"{}","tool":"Read","args":{args}}}"#,
            time(at)
        );
        let hint = if with_id {
            String::new()
        } else {
            format!(r#""tool":"Read","args":{args},"#)
        };
        let completion = format!(
            r#"{{"v":1,"kind":"completion","source":"gen","session":"{session}","turn":"{turn}",{id}{hint}"time":"{}","result":{{"n":{i}}}}}"#,
            time(at + 300)
        );
        let early = i % 7 == 3;
        if early {
            lines.push(completion.clone());
        }
        lines.push(announce.clone());
        if with_id && i % 6 == 1 {
            lines.push(format!(
                r#"{{"v":1,"kind":"approval","source":"gen","session":"{session}",{id}"time":"{}","decision":"approved","by":"ops"}}"#,
                time(at + 100)
            ));
        }
        if with_id && i % 9 == 2 {
            lines.push(announce.clone()); // a re-emitted announce
        }
        if !with_id && i % 8 == 4 {
            lines.push(announce.clone()); // an at-least-once copy of an id-less announce
        }
        if !early {
            lines.push(completion.clone());
        }
        if i % 11 == 5 {
            late.push(completion); // a repeat after the record was published
        }
        if i % 10 == 9 {
            lines.push(format!(
                r#"{{"v":1,"kind":"turn_end","source":"gen","session":"{session}","turn":"{turn}","time":"{}"}}"#,
                time(at + 400)
            ));
        }
        if lines.len() % 13 == 0 {
            lines.append(&mut late);
        }
    }
    lines.append(&mut late);
    // An idempotent retry of a call already published: a new revision of its record.
    for (n, id) in [(0, "retry-a"), (1, "retry-b")] {
        lines.push(format!(
            r#"{{"v":1,"kind":"announce","source":"gen","session":"sess-idem","callId":"{id}","time":"{}","tool":"Charge","args":{{"n":{n}}},"sideEffects":{{"level":"external_write","idempotencyKey":"charge-1"}}}}"#,
            time(n * 10)
        ));
        if n == 0 {
            lines.push(format!(
                r#"{{"v":1,"kind":"completion","source":"gen","session":"sess-idem","callId":"{id}","time":"{}","result":"ok"}}"#,
                time(5)
            ));
        }
    }
    lines.push(format!(
        r#"{{"v":1,"kind":"completion","source":"gen","session":"sess-orphan","callId":"nobody","time":"{}","result":1}}"#,
        time(50)
    ));
    lines.push(r#"{"v":1,"kind":"announce","source":"gen"#.to_owned()); // cut short: a bad line
    lines
}

fn write_lines(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn records_of(path: &Path) -> Vec<ToolCallRecord> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a record: {e}: {l}")))
        .collect()
}

#[test]
fn a_clean_local_run_of_generated_events_passes() {
    let dir = scratch_dir("clean");
    let input = dir.join("events.jsonl");
    write_lines(&input, &generated_events(400));
    let records = dir.join("records.jsonl");
    let local = run(&["local", s(&input), "-o", s(&records), "-q"]);
    assert_eq!(local.code, 0, "{}", local.show());

    let audit = run(&["audit", s(&input), "--records", s(&records)]);
    assert_eq!(audit.code, 0, "{}", audit.show());
    assert!(
        audit.stdout.contains("ok: every input is accounted for"),
        "{}",
        audit.show()
    );
    // Every kind of accounting was exercised.
    for part in [
        "later revisions",
        "repeats of a record's event",
        "turn events",
        "1 bad lines",
    ] {
        assert!(audit.stdout.contains(part), "{part}: {}", audit.show());
    }
    assert!(
        !audit.stdout.contains(" 0 repeats") && !audit.stdout.contains(" 0 later revisions"),
        "{}",
        audit.show()
    );
    // Not a terminal: no progress line.
    assert!(audit.stderr.is_empty(), "{}", audit.show());
    // Records name their lines; the audit finds the file from another directory too.
    let rec = &records_of(&records)[0];
    assert!(
        serde_json::to_string(&rec.provenance)
            .unwrap()
            .contains(r#""lines":["#),
        "{rec:?}"
    );
    let relative = run(&[
        "audit",
        &format!(
            "{}/../{}/events.jsonl",
            s(&dir),
            dir.file_name().unwrap().to_str().unwrap()
        ),
        "-r",
        s(&records),
        "--quiet",
    ]);
    assert_eq!(relative.code, 0, "{}", relative.show());
    assert!(
        relative.stdout.is_empty(),
        "--quiet prints only discrepancies: {}",
        relative.show()
    );
}

#[test]
fn a_clean_local_run_of_the_real_fixtures_passes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures");
    if !root.is_dir() {
        println!(
            "skipped: {} is missing (the shared fixtures live beside the project)",
            root.display()
        );
        return;
    }
    let dir = scratch_dir("fixtures");
    let groups: [(&str, &[&str]); 5] = [
        (
            "claude-code",
            &[
                "claude-code/agentcmd-full-session-four.jsonl",
                "claude-code/agentcmd-full-session-two.jsonl",
                "claude-code/spotter-tool-heavy.jsonl",
            ],
        ),
        (
            "codex",
            &[
                "codex/agentcmd-rollout-01997e76.jsonl",
                "codex/agentcmd-rollout-01997ea4.jsonl",
            ],
        ),
        (
            "codex-exec",
            &["codex/agentcmd-exec-json-stream-outputs.jsonl"],
        ),
        (
            "gemini-cli",
            &[
                "gemini-cli/agentcmd-session-453aa339.json",
                "gemini-cli/agentcmd-session-981c87cb.json",
            ],
        ),
        (
            "openai-responses",
            &["openai-responses/vercel-ai-reasoning-encrypted-content.chunks.txt"],
        ),
    ];
    let mut audited = 0;
    for (format, files) in groups {
        let inputs: Vec<String> = files
            .iter()
            .map(|f| root.join(f))
            .filter(|p| p.is_file())
            .map(|p| p.display().to_string())
            .collect();
        if inputs.is_empty() {
            continue;
        }
        // With the native ids, and without them (the fallbacks, and id-less repeats).
        for drop_ids in [false, true] {
            let records = dir.join(format!("{format}-{drop_ids}.jsonl"));
            let mut args = vec!["local", "--format", format, "-o", s(&records), "-q"];
            if drop_ids {
                args.push("--drop-ids");
            }
            args.extend(inputs.iter().map(String::as_str));
            let local = run(&args);
            assert_eq!(local.code, 0, "{format}: {}", local.show());
            let mut args = vec!["audit", "--format", format, "--records", s(&records)];
            if drop_ids {
                args.push("--drop-ids");
            }
            args.extend(inputs.iter().map(String::as_str));
            let audit = run(&args);
            assert_eq!(
                audit.code,
                0,
                "{format} drop_ids={drop_ids}: {}",
                audit.show()
            );
            let rec = records_of(&records);
            assert!(!rec.is_empty(), "{format}");
            assert!(
                serde_json::to_string(&rec[0].provenance)
                    .unwrap()
                    .contains(r#""events":["#),
                "{format}: {:?}",
                rec[0].provenance
            );
            audited += 1;
        }
    }
    assert!(audited > 0, "no fixture found under {}", root.display());
}

#[test]
fn a_file_saved_with_a_byte_order_mark_is_audited_as_local_read_it_and_so_is_a_records_file() {
    let dir = scratch_dir("bom");
    let (plain, marked) = (dir.join("plain.jsonl"), dir.join("marked.jsonl"));
    let lines = generated_events(40);
    write_lines(&plain, &lines);
    let text = std::fs::read(&plain).unwrap();
    std::fs::write(
        &marked,
        [&toolcalls_model::bom::UTF8_BOM[..], &text].concat(),
    )
    .unwrap();
    let (plain_records, marked_records) = (dir.join("plain-records"), dir.join("marked-records"));
    for (input, records) in [(&plain, &plain_records), (&marked, &marked_records)] {
        let local = run(&["local", s(input), "-o", s(records), "-q"]);
        assert_eq!(local.code, 0, "{}", local.show());
    }
    // The mark is no event and no bad line: the records are the plain file's, but for the name
    // their provenance gives the file.
    let text_of = |p: &Path| std::fs::read_to_string(p).unwrap();
    assert_eq!(
        text_of(&marked_records).replace("marked.jsonl", "plain.jsonl"),
        text_of(&plain_records)
    );
    assert!(!records_of(&plain_records).is_empty());
    let audit = run(&["audit", s(&marked), "--records", s(&marked_records)]);
    assert_eq!(audit.code, 0, "{}", audit.show());
    for part in ["ok: every input is accounted for", " 1 bad lines"] {
        assert!(audit.stdout.contains(part), "{part}: {}", audit.show());
    }
    // A records file saved again with the mark is read as without it.
    let text = std::fs::read(&marked_records).unwrap();
    std::fs::write(
        &marked_records,
        [&toolcalls_model::bom::UTF8_BOM[..], &text].concat(),
    )
    .unwrap();
    let audit = run(&["audit", s(&marked), "--records", s(&marked_records)]);
    assert_eq!(audit.code, 0, "{}", audit.show());
}

#[test]
fn an_input_in_utf16_is_refused_with_its_encoding_named() {
    let dir = scratch_dir("utf16");
    let input = dir.join("events.jsonl");
    let text = generated_events(5).join("\n") + "\n";
    let bytes: Vec<u8> = format!("\u{feff}{text}")
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect();
    std::fs::write(&input, bytes).unwrap();
    let records = dir.join("records.jsonl");
    std::fs::write(&records, "").unwrap();
    let audit = run(&["audit", s(&input), "--records", s(&records)]);
    assert_eq!(audit.code, 2, "{}", audit.show());
    assert!(
        audit.stderr.contains("events.jsonl is UTF-16LE text"),
        "{}",
        audit.show()
    );
}

#[test]
fn a_removed_record_is_named_by_its_positions() {
    let dir = scratch_dir("removed");
    let input = dir.join("events.jsonl");
    write_lines(&input, &generated_events(60));
    let records = dir.join("records.jsonl");
    assert_eq!(run(&["local", s(&input), "-o", s(&records), "-q"]).code, 0);
    let all = std::fs::read_to_string(&records).unwrap();
    let lines: Vec<&str> = all.lines().collect();
    // A record with an id and two events: its announce and its result go missing.
    let (at, victim) = lines
        .iter()
        .enumerate()
        .map(|(i, l)| (i, serde_json::from_str::<ToolCallRecord>(l).unwrap()))
        .find(|(_, r)| r.stream_id.is_some() && r.provenance.len() == 2)
        .expect("a record of two events");
    let cut = dir.join("cut.jsonl");
    let kept: Vec<String> = lines
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != at)
        .map(|(_, l)| (*l).to_owned())
        .collect();
    write_lines(&cut, &kept);

    let audit = run(&["audit", s(&input), "--records", s(&cut)]);
    assert_eq!(audit.code, 1, "{}", audit.show());
    for &line in victim.provenance.0[0].positions() {
        let want = format!("missing     {}:{line}: ", input.display());
        assert!(audit.stdout.contains(&want), "{want}: {}", audit.show());
    }
    assert!(
        audit
            .stdout
            .contains(&format!("its record would be {}", victim.id())),
        "{}",
        audit.show()
    );
    assert!(audit.stdout.contains("2 discrepancies"), "{}", audit.show());
}

#[test]
fn a_record_that_names_a_line_which_is_no_event_is_named() {
    let dir = scratch_dir("not-an-event");
    let input = dir.join("events.jsonl");
    let mut lines = generated_events(30);
    write_lines(&input, &lines);
    let records = dir.join("records.jsonl");
    assert_eq!(run(&["local", s(&input), "-o", s(&records), "-q"]).code, 0);
    let record = records_of(&records)
        .into_iter()
        .find(|r| r.stream_id.is_some())
        .expect("a record with an id");
    let line = record.provenance.0[0].positions()[0];
    // The input the records were made from is not the input audited: one of its lines was
    // damaged since.
    lines[line as usize - 1] = "{\"v\":1,".to_owned();
    write_lines(&input, &lines);

    let audit = run(&["audit", s(&input), "--records", s(&records)]);
    assert_eq!(audit.code, 1, "{}", audit.show());
    let want = format!(
        "no input    {}:{line}: named by record {}, but the input holds no event there (what it holds is not one: not_json)",
        input.display(),
        record.id()
    );
    assert!(audit.stdout.contains(&want), "{want}: {}", audit.show());
    assert!(audit.stdout.contains("1 discrepancies"), "{}", audit.show());
}

#[test]
fn a_record_that_names_an_event_of_another_session_is_named() {
    let dir = scratch_dir("other-scope");
    let input = dir.join("events.jsonl");
    write_lines(&input, &generated_events(30));
    let records = dir.join("records.jsonl");
    assert_eq!(run(&["local", s(&input), "-o", s(&records), "-q"]).code, 0);
    let all = std::fs::read_to_string(&records).unwrap();
    let mut lines: Vec<String> = all.lines().map(str::to_owned).collect();
    let (at, record) = lines
        .iter()
        .enumerate()
        .map(|(i, l)| (i, serde_json::from_str::<ToolCallRecord>(l).unwrap()))
        .find(|(_, r)| r.provenance.len() == 2)
        .expect("a record of two events");
    // The record, but for its session: its events are another session's.
    let mut moved = record.clone();
    moved.metadata.session = toolcalls_model::SessionId::from("elsewhere");
    lines[at] = String::from_utf8(moved.encode()).unwrap();
    write_lines(&records, &lines);

    let audit = run(&["audit", s(&input), "--records", s(&records)]);
    assert_eq!(audit.code, 1, "{}", audit.show());
    for &line in record.provenance.0[0].positions() {
        let want = format!(
            "scope       {}:{line}: named by record {}, but the event there is of source {}, session {}, not the record's",
            input.display(),
            record.id(),
            record.metadata.source.as_str(),
            record.metadata.session.as_str(),
        );
        assert!(audit.stdout.contains(&want), "{want}: {}", audit.show());
    }
    assert!(audit.stdout.contains("2 discrepancies"), "{}", audit.show());
}

/// A v1 event of source `s`, session `x`, with call id `id` at `ms`; `extra` ends its fields.
fn event(kind: &str, id: &str, ms: i64, extra: &str) -> String {
    format!(
        r#"{{"v":1,"kind":"{kind}","source":"s","session":"x","callId":"{id}","time":"{}"{extra}}}"#,
        time(ms)
    )
}

/// Facts without an id about a call known by its checksum — execution start and end, an
/// approval, a hook decision — delivered again after the call's record went out are the
/// correlator's late repeats: the audit finds the record that holds what each says, and counts
/// them as repeats, not as missing.
#[test]
fn idless_facts_delivered_again_after_their_record_are_repeats() {
    let dir = scratch_dir("idless-facts");
    let checksum = toolcalls_model::checksum_of("T", Some(&serde_json::json!({"a": 1})));
    let fact = |kind: &str, ms: i64, extra: &str| {
        format!(
            r#"{{"v":1,"kind":"{kind}","source":"s","session":"x","time":"{}","checksum":"{}"{extra}}}"#,
            time(ms),
            checksum.as_str()
        )
    };
    let facts = [
        fact("execution_start", 10, ""),
        fact("approval", 20, r#","decision":"approved","by":"ops""#),
        fact("hook_decision", 30, r#","hook":"pre","decision":"allow""#),
        fact("execution_end", 40, r#","durationMs":30"#),
    ];
    let lines = [
        vec![event("announce", "c1", 0, r#","tool":"T","args":{"a":1}"#)],
        facts.to_vec(),
        vec![event("completion", "c1", 50, r#","result":"ok""#)],
        facts.to_vec(),
    ]
    .concat();
    let (input, records, local) = local_run(&dir, &lines);
    assert!(local.stderr.contains("late 4"), "{}", local.show());
    let audit = run(&["audit", s(&input), "--records", s(&records)]);
    assert_eq!(audit.code, 0, "{}", audit.show());
    assert!(
        audit.stdout.contains("4 repeats of a record's event"),
        "{}",
        audit.show()
    );
    // What no record holds is still missing: an execution start at another time.
    let other = [lines.clone(), vec![fact("execution_start", 11, "")]].concat();
    write_lines(&input, &other);
    let audit = run(&["audit", s(&input), "--records", s(&records)]);
    assert_eq!(audit.code, 1, "{}", audit.show());
    let want = format!("missing     {}:11: execution_start", input.display());
    assert!(audit.stdout.contains(&want), "{want}: {}", audit.show());
}

/// A fact with an id that comes once its call closed is late for its record, not a repeat of
/// the record's facts: the audit tells a copy of a hook decision the record holds from another
/// one it never got (the correlator takes both as late: one record per call).
#[test]
fn a_fact_after_its_call_closed_is_late_and_its_copy_a_repeat() {
    let dir = scratch_dir("late-facts");
    let hook = |name: &str, ms: i64| {
        event(
            "hook_decision",
            "c1",
            ms,
            &format!(r#","hook":"{name}","decision":"allow""#),
        )
    };
    let lines = [
        event("announce", "c1", 0, r#","tool":"T","args":{}"#),
        hook("h1", 10),
        event("completion", "c1", 50, r#","result":"ok""#),
        hook("h1", 10),
        hook("h2", 60),
    ];
    let (input, records, local) = local_run(&dir, &lines);
    assert!(local.stderr.contains("late 2"), "{}", local.show());
    let audit = run(&["audit", s(&input), "--records", s(&records)]);
    assert_eq!(audit.code, 0, "{}", audit.show());
    assert!(
        audit
            .stdout
            .contains("1 repeats of a record's event, 1 late for their record"),
        "{}",
        audit.show()
    );
}

/// A producer that repeats one event thousands of times while its call is pending: the record
/// lists the first copies (core's `MAX_LISTED_REPEATS`) and only counts the rest, and the audit
/// still accounts for every line, the unlisted copies as repeats of the record's event.
#[test]
fn copies_a_record_does_not_list_are_its_repeats() {
    let dir = scratch_dir("unlisted-copies");
    let copies = 1_500;
    let announce = |id: &str| event("announce", id, 0, r#","tool":"T","args":{"a":1}"#);
    let idless = |kind: &str, ms: i64, extra: &str| {
        format!(
            r#"{{"v":1,"kind":"{kind}","source":"s","session":"x","time":"{}","tool":"U"{extra}}}"#,
            time(ms)
        )
    };
    let mut lines = vec![announce("c1"), idless("announce", 1, r#","args":{}"#)];
    for _ in 0..copies {
        lines.push(announce("c1"));
        lines.push(idless("announce", 1, r#","args":{}"#));
    }
    lines.push(event("completion", "c1", 50, r#","result":"ok""#));
    lines.push(idless("completion", 60, r#","result":"ok""#));
    let (input, records, local) = local_run(&dir, &lines);
    assert_eq!(local.code, 0, "{}", local.show());
    let listed = toolcalls_core::MAX_LISTED_REPEATS as usize;
    for record in records_of(&records) {
        assert_eq!(record.correlation.duplicates as usize, copies);
        let positions: usize = record
            .provenance
            .0
            .iter()
            .map(|o| o.positions().len())
            .sum();
        assert_eq!(
            positions,
            listed + 2,
            "the announce, its listed copies, the result"
        );
    }
    let audit = run(&["audit", s(&input), "--records", s(&records)]);
    assert_eq!(audit.code, 0, "{}", audit.show());
    let want = format!("{} repeats of a record's event", 2 * (copies - listed));
    assert!(audit.stdout.contains(&want), "{want}: {}", audit.show());
    // A record that counts fewer copies than it leaves out does not account for the rest.
    let fewer = std::fs::read_to_string(&records)
        .unwrap()
        .replace(&format!(r#""duplicates":{copies}"#), r#""duplicates":1100"#);
    std::fs::write(&records, fewer).unwrap();
    let audit = run(&["audit", s(&input), "--records", s(&records)]);
    assert_eq!(audit.code, 1, "{}", audit.show());
    let left = 2 * (copies - 1100);
    let want = format!("{left} discrepancies");
    assert!(audit.stdout.contains(&want), "{want}: {}", audit.show());
    assert_eq!(audit.stdout.matches("superseded  ").count(), left);
}

/// A session's file read again while the session goes on (a follower restarted without its
/// checkpoints), an hour of calls long: the calls closed more than `--dedupe-window` before are
/// forgotten, and their copies, too old to tell from repeats, are late — not calls that time out
/// at once (or results left orphaned) under their records' names. One record per call, and the
/// audit accounts for every copy.
#[test]
fn a_session_read_again_after_its_calls_were_forgotten_gives_no_second_record() {
    let dir = scratch_dir("read-again");
    let mut lines = Vec::new();
    for minute in 0..=60 {
        let id = format!("c{minute}");
        let at = minute * 60_000;
        lines.push(event("announce", &id, at, r#","tool":"T","args":{}"#));
        lines.push(event("completion", &id, at + 1_000, r#","result":"ok""#));
    }
    let twice = [lines.clone(), lines].concat();
    let (input, records, local) = local_run(&dir, &twice);
    assert_eq!(local.code, 0, "{}", local.show());
    let records_read = records_of(&records);
    assert_eq!(records_read.len(), 61, "{}", local.show());
    assert!(
        records_read
            .iter()
            .all(|r| r.status.phase == toolcalls_model::Phase::Succeeded),
        "{}",
        local.show()
    );
    let audit = run(&["audit", s(&input), "--records", s(&records)]);
    assert_eq!(audit.code, 0, "{}", audit.show());
    assert!(
        audit.stdout.contains("122 repeats of a record's event"),
        "{}",
        audit.show()
    );
}

/// `lines` written to `events.jsonl` in `dir` and given to `toolcalls local`, its records
/// to `records.jsonl`: the two paths and the run.
fn local_run(dir: &Path, lines: &[String]) -> (PathBuf, PathBuf, Ran) {
    let input = dir.join("events.jsonl");
    write_lines(&input, lines);
    let records = dir.join("records.jsonl");
    let local = run(&["local", s(&input), "-o", s(&records)]);
    (input, records, local)
}

/// The id of the record on `line`.
fn record_id(line: &str) -> String {
    let record: ToolCallRecord = serde_json::from_str(line).unwrap();
    record.id().to_string()
}

/// A result that comes after its call timed out is late for its record (the correlator's
/// `Late`), counted apart and no discrepancy; but a result left out of the provenance of a
/// record that has one is missing, and a record whose id was changed is foreign.
#[test]
fn late_results_are_counted_and_a_result_or_an_id_a_record_does_not_account_for_is_named() {
    let dir = scratch_dir("late-and-foreign");
    let input = dir.join("events.jsonl");
    write_lines(
        &input,
        &[
            event("announce", "a", 0, r#","tool":"T","args":{"n":1}"#),
            // Its time moves the stream past a's timeout: a is published TimedOut.
            event("announce", "b", 10_000, r#","tool":"T","args":{"n":2}"#),
            event("completion", "a", 11_000, r#","result":"too late""#),
            event("completion", "b", 12_000, r#","result":"ok""#),
        ],
    );
    let records = dir.join("records.jsonl");
    let local = run(&[
        "local",
        s(&input),
        "-o",
        s(&records),
        "-q",
        "--call-timeout",
        "5s",
    ]);
    assert_eq!(local.code, 0, "{}", local.show());
    let audit = run(&["audit", s(&input), "--records", s(&records)]);
    assert_eq!(audit.code, 0, "{}", audit.show());
    assert!(
        audit
            .stdout
            .contains(" 0 repeats of a record's event, 1 late for their record,"),
        "{}",
        audit.show()
    );

    // b's record without its result's line: the result is missing, not late, and the record
    // says it has a result it lists no completion for.
    let lines: Vec<String> = std::fs::read_to_string(&records)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let b = lines
        .iter()
        .position(|l| l.contains(r#""phase":"Succeeded""#))
        .expect("b's record");
    let cut = dir.join("cut.jsonl");
    let mut edited = lines.clone();
    edited[b] = edited[b].replace(r#""lines":[2,4]"#, r#""lines":[2]"#);
    assert_ne!(edited[b], lines[b]);
    write_lines(&cut, &edited);
    let audit = run(&["audit", s(&input), "--records", s(&cut)]);
    assert_eq!(audit.code, 1, "{}", audit.show());
    let want = format!("missing     {}:4: completion", input.display());
    assert!(audit.stdout.contains(&want), "{want}: {}", audit.show());
    let want = format!("no result   record {}", record_id(&lines[b]));
    assert!(audit.stdout.contains(&want), "{want}: {}", audit.show());
    assert!(audit.stdout.contains("2 discrepancies"), "{}", audit.show());

    // b's record under another id.
    let other = "00000000-0000-5000-8000-000000000000";
    let forged = dir.join("forged.jsonl");
    let mut edited = lines.clone();
    edited[b] = edited[b].replace(&record_id(&lines[b]), other);
    assert_ne!(edited[b], lines[b]);
    write_lines(&forged, &edited);
    let audit = run(&["audit", s(&input), "--records", s(&forged)]);
    assert_eq!(audit.code, 1, "{}", audit.show());
    let want =
        format!("foreign id  record {other}: its id derives from none of the events it lists");
    assert!(audit.stdout.contains(&want), "{want}: {}", audit.show());
    assert!(audit.stdout.contains("1 discrepancies"), "{}", audit.show());
}

#[test]
fn a_record_published_twice_with_different_content_is_named() {
    let dir = scratch_dir("twice");
    let input = dir.join("events.jsonl");
    write_lines(&input, &generated_events(40));
    let records = dir.join("records.jsonl");
    assert_eq!(run(&["local", s(&input), "-o", s(&records), "-q"]).code, 0);
    let all = std::fs::read_to_string(&records).unwrap();
    let first = all.lines().next().unwrap();
    let victim: ToolCallRecord = serde_json::from_str(first).unwrap();

    // A byte-identical copy (what Tansu shows after an aborted batch) is no discrepancy.
    let copies = dir.join("copies.jsonl");
    std::fs::write(&copies, format!("{all}{first}\n")).unwrap();
    let audit = run(&["audit", s(&input), "--records", s(&copies)]);
    assert_eq!(audit.code, 0, "{}", audit.show());
    assert!(
        audit.stdout.contains("1 identical copies"),
        "{}",
        audit.show()
    );

    // Another version at the same revision is.
    let conflicting = dir.join("conflicting.jsonl");
    let changed = first.replacen(r#""eventsMerged":"#, r#""eventsMerged":1"#, 1);
    assert_ne!(changed, first);
    std::fs::write(&conflicting, format!("{all}{changed}\n")).unwrap();
    let audit = run(&["audit", s(&input), "--records", s(&conflicting)]);
    assert_eq!(audit.code, 1, "{}", audit.show());
    let want = format!(
        "conflict    record {} revision {} was published twice with different content",
        victim.id(),
        victim.metadata.revision
    );
    assert!(audit.stdout.contains(&want), "{}", audit.show());

    // A position claimed by two records.
    let stolen = dir.join("stolen.jsonl");
    let mut other: ToolCallRecord = serde_json::from_str(all.lines().nth(1).unwrap()).unwrap();
    other.provenance = victim.provenance.clone();
    std::fs::write(
        &stolen,
        format!("{all}{}\n", serde_json::to_string(&other).unwrap()),
    )
    .unwrap();
    let audit = run(&["audit", s(&input), "--records", s(&stolen)]);
    assert_eq!(audit.code, 1, "{}", audit.show());
    let line = victim.provenance.0[0].positions()[0];
    let want = format!(
        "twice       {}:{line}: in record {} and in record {}",
        input.display(),
        victim.id(),
        other.id()
    );
    assert!(audit.stdout.contains(&want), "{want}\n{}", audit.show());
}

#[test]
fn usage_errors_exit_2() {
    let dir = scratch_dir("usage");
    let input = dir.join("events.jsonl");
    write_lines(&input, &generated_events(3));
    for args in [
        vec!["audit", s(&input)],                                     // no --records
        vec!["audit", "--records", s(&input)],                        // --records without FILEs
        vec!["audit", s(&input), "-r", "/nonexistent/records.jsonl"], // unreadable
        vec!["audit", s(&input), "-r", s(&input), "--ranges", "x=1..2"], // ranges on files
        vec!["audit", "--ranges", "no-range-here"],
        vec![
            "audit",
            "--ranges",
            "toolcalls.announce:0=-2..9223372036854775807",
        ],
        vec!["audit", "--pending", "sometimes"],
    ] {
        let ran = run(&args);
        assert_eq!(ran.code, 2, "{args:?}: {}", ran.show());
        assert!(!ran.stderr.is_empty(), "{args:?}: the error is explained");
    }
    let negative = run(&["audit", "--ranges", "toolcalls.announce:0=-2..5"]);
    assert!(
        negative.stderr.contains("offsets are 0 or more"),
        "{}",
        negative.show()
    );
    let help = run(&["audit", "--help"]);
    assert_eq!(help.code, 0);
    for key in [
        "[config: audit.records_file]",
        "[config: audit.ranges]",
        "TOOLCALLS_AUDIT_PENDING",
    ] {
        assert!(help.stdout.contains(key), "{key}: {}", help.stdout);
    }
}

/// Records that name none of the audited files, or name one read the other way, stop the audit
/// (exit 2) saying which files they name: it used to say "ok" having checked nothing. A run
/// that read standard input is audited with `-`.
#[test]
fn records_of_other_files_stop_the_audit_and_stdin_is_audited_as_dash() {
    let dir = scratch_dir("other-files");
    let input = dir.join("events.jsonl");
    write_lines(&input, &generated_events(20));
    let records = dir.join("records.jsonl");
    assert_eq!(run(&["local", s(&input), "-o", s(&records), "-q"]).code, 0);
    let empty = dir.join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    for (args, said) in [
        (
            vec!["audit", s(&empty), "-r", s(&records)],
            format!(
                "the records name none of the audited files, only others ({})",
                input.display()
            ),
        ),
        (
            vec!["audit", "--format", "codex", s(&input), "-r", s(&records)],
            format!(
                "the records name {} by line, as v1 events, but the audit reads it by event",
                input.display()
            ),
        ),
    ] {
        let ran = run(&args);
        assert_eq!(ran.code, 2, "{args:?}: {}", ran.show());
        assert!(ran.stderr.contains(&said), "{said}: {}", ran.show());
    }

    // The input file as standard input; what the command printed, and its exit code.
    let from_stdin = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_toolcalls"))
            .args(args)
            .stdin(std::fs::File::open(&input).unwrap())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let shown = format!("{args:?}: {stdout}{}", String::from_utf8_lossy(&out.stderr));
        (out.status.code(), stdout, shown)
    };
    let piped = dir.join("piped.jsonl");
    let (code, _, shown) = from_stdin(&["local", "-q", "-o", s(&piped)]);
    assert_eq!(code, Some(0), "{shown}");
    let (code, stdout, shown) = from_stdin(&["audit", "-", "-r", s(&piped)]);
    assert_eq!(code, Some(0), "{shown}");
    assert!(
        stdout.contains("ok: every input is accounted for"),
        "{shown}"
    );
    let (code, _, shown) = from_stdin(&["audit", "-", "-r", "-"]);
    assert_eq!(code, Some(2), "{shown}");

    // Standard input with a line `local` could not use, in its dead letters as `<stdin>`.
    let with_bad = dir.join("with-bad.jsonl");
    let mut lines = generated_events(5);
    lines.insert(3, "not json".to_owned());
    write_lines(&with_bad, &lines);
    let (piped, dead) = (dir.join("piped-bad.jsonl"), dir.join("dead.jsonl"));
    let stdin_run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_toolcalls"))
            .args(args)
            .stdin(std::fs::File::open(&with_bad).unwrap())
            .output()
            .unwrap()
    };
    let ran = stdin_run(&["local", "-q", "-o", s(&piped), "--dead-letters", s(&dead)]);
    assert_eq!(ran.status.code(), Some(0), "{ran:?}");
    assert!(std::fs::read_to_string(&dead)
        .unwrap()
        .contains(r#""input":"<stdin>","line":4"#));
    let ran = stdin_run(&["audit", "-", "-r", s(&piped), "--dead-letters", s(&dead)]);
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert_eq!(ran.status.code(), Some(0), "{ran:?}");
    let dead_letters = std::fs::read_to_string(&dead).unwrap().lines().count();
    let want = format!(", {dead_letters} dead-lettered, ");
    assert!(stdout.contains(&want), "{want}: {stdout}");
    assert!(
        stdout.contains("ok: every input is accounted for"),
        "{stdout}"
    );

    // A mistyped input is named, not taken for a file the records do not name.
    let ran = run(&["audit", s(&dir.join("evnets.jsonl")), "-r", s(&records)]);
    assert_eq!(ran.code, 2, "{}", ran.show());
    assert!(ran.stderr.contains("cannot open"), "{}", ran.show());
    assert!(ran.stderr.contains("evnets.jsonl"), "{}", ran.show());
}

/// The lines of a native file its adapter cannot read are bad lines to the audit, as `local`
/// counts them.
#[test]
fn a_native_files_unreadable_lines_are_its_bad_lines() {
    let dir = scratch_dir("native-bad-lines");
    let sample = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/adapters/tests/data/claude-hooks.jsonl"
    );
    let input = dir.join("hooks.jsonl");
    let text = std::fs::read_to_string(sample).unwrap();
    std::fs::write(&input, format!("{text}{{\"broken\nnot json\n")).unwrap();
    let (records, dead) = (dir.join("records.jsonl"), dir.join("dead.jsonl"));
    let local = run(&[
        "local",
        "-f",
        "claude-code-hooks",
        s(&input),
        "-o",
        s(&records),
        "--dead-letters",
        s(&dead),
    ]);
    assert!(local.stderr.contains(", 2 bad lines,"), "{}", local.show());
    let audit_args = [
        "audit",
        "-f",
        "claude-code-hooks",
        s(&input),
        "-r",
        s(&records),
    ];
    let audit = run(&audit_args);
    assert_eq!(audit.code, 0, "{}", audit.show());
    assert!(audit.stdout.contains(", 2 bad lines"), "{}", audit.show());
    // Its dead letters name the file, not a line: the adapter made no event of them to number.
    let written = std::fs::read_to_string(&dead).unwrap();
    assert_eq!(written.lines().count(), 2, "{written}");
    for letter in written.lines() {
        let d: serde_json::Value = serde_json::from_str(letter).unwrap();
        assert_eq!(d["input"], s(&input), "{letter}");
        assert_eq!(d["reason"], "unreadable", "{letter}");
        assert!(
            d.get("line").is_none() && d.get("event").is_none(),
            "{letter}"
        );
    }
    let audit = run(&[&audit_args[..], &["--dead-letters", s(&dead)]].concat());
    assert_eq!(audit.code, 0, "{}", audit.show());
    assert!(
        audit.stdout.contains(", 2 dead letters,"),
        "{}",
        audit.show()
    );
}

/// Copies `from` into a new topic `to` (keys, payloads, headers), leaving out the messages
/// `skip` refuses and adding `extra` payloads (key of the first message kept).
fn copy_topic(
    s: &toolcalls_processor::Settings,
    from: &[Msg],
    to: &str,
    skip: impl Fn(usize) -> bool,
    extra: &[(Vec<u8>, Vec<u8>)],
) {
    let mut t = s.clone();
    t.topics.records = to.to_owned();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(create_topics(&t, 1));
    let p = producer();
    for (i, m) in from.iter().enumerate() {
        if skip(i) {
            continue;
        }
        let mut r: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(to);
        if let Some(k) = &m.key {
            r = r.key(k);
        }
        if let Some(v) = &m.payload {
            r = r.payload(v);
        }
        let mut h = OwnedHeaders::new();
        for (k, v) in &m.headers {
            h = h.insert(Header {
                key: k,
                value: Some(v.as_bytes()),
            });
        }
        r = r.headers(h);
        p.send(r).map_err(|(e, _)| e).expect("enqueue");
    }
    for (k, v) in extra {
        p.send(BaseRecord::<'_, [u8], [u8]>::to(to).key(k).payload(v))
            .map_err(|(e, _)| e)
            .expect("enqueue");
    }
    p.flush(WAIT).expect("flush");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_processor_run_passes_and_what_goes_missing_is_named() {
    let s = settings("audit");
    create_topics(&s, 2).await;
    // Calls with ids that complete, some repeated; id-less calls; calls left pending.
    let (announces, completions) = synth("audit", 4, 12);
    let mut events: Vec<Event> = announces.clone();
    events.extend(completions.iter().take(40).cloned());
    events.extend(announces.iter().step_by(5).cloned()); // at-least-once repeats
    for i in 0..6 {
        let idless = format!(
            r#"{{"v":1,"kind":"announce","source":"synth","session":"audit-s{}","time":"{}","tool":"grep","args":{{"q":{i}}}}}"#,
            i % 4,
            time(100_000 + i * 10)
        );
        let result = format!(
            r#"{{"v":1,"kind":"completion","source":"synth","session":"audit-s{}","time":"{}","tool":"grep","args":{{"q":{i}}},"result":[{i}]}}"#,
            i % 4,
            time(100_000 + i * 10 + 5)
        );
        events.push(Event::decode(idless.as_bytes()).unwrap());
        events.push(Event::decode(result.as_bytes()).unwrap());
    }
    // A record per call that completes: 40 with ids, 6 without.
    let want_records = 46;
    produce_events_timed(&s, &events);
    // Two inputs the processor dead-letters.
    produce_raw(&s.topics.announce, Some(b"audit-s0"), Some(b"not json"));
    produce_raw(
        &s.topics.completion,
        Some(b"audit-s1"),
        Some(br#"{"v":1,"kind":"completion"}"#),
    );

    let mut proc = Proc::spawn(&s, "a0", None);
    let records = {
        let topic = s.topics.records.clone();
        tokio::task::spawn_blocking(move || {
            read_until(&topic, |m| {
                m.iter()
                    .map(Msg::key_str)
                    .collect::<std::collections::BTreeSet<_>>()
                    .len()
                    >= want_records
            })
        })
        .await
        .unwrap()
    };
    let dlq = {
        let topic = s.topics.dlq.clone();
        tokio::task::spawn_blocking(move || read_until(&topic, |m| m.len() >= 2))
            .await
            .unwrap()
    };
    assert!(proc.terminate().success(), "the processor exits cleanly");

    let topic_args = |records: &str, dlq: &str| audit_args(&s, records, dlq);
    let audit = |args: Vec<String>| {
        tokio::task::spawn_blocking(move || {
            run(&args.iter().map(String::as_str).collect::<Vec<_>>())
        })
    };

    // The clean run: every input accounted for, the pending ones from the changelog.
    let clean = audit(topic_args(&s.topics.records, &s.topics.dlq))
        .await
        .unwrap();
    assert_eq!(clean.code, 0, "{}", clean.show());
    println!("{}", clean.stdout);
    // The announces of the calls without a result, and the repeats of those.
    let pending = (40..announces.len()).count()
        + (0..announces.len()).step_by(5).filter(|i| *i >= 40).count();
    for part in [
        format!(", {pending} pending, "),
        ", 2 dead-lettered, ".to_owned(),
        "ok: every input is accounted for".to_owned(),
    ] {
        assert!(clean.stdout.contains(&part), "{part}: {}", clean.show());
    }
    // The repeats of the 40 calls that complete: one that reaches the correlator before its
    // call's result merges into the record (its position is in the record's provenance), one
    // after it is a repeat of a record's event. Which, depends on how the processor interleaves
    // the two topics when one of them is fetched later, so only their sum is fixed.
    let count_before = |what: &str| -> usize {
        let (before, _) = clean.stdout.split_once(what).unwrap_or_default();
        let number = before.rsplit(' ').next().and_then(|n| n.parse().ok());
        number.unwrap_or_else(|| panic!("no count before {what:?}: {}", clean.show()))
    };
    let in_records = count_before(" in records");
    let repeats = count_before(" repeats of a record's event");
    let completed_repeats = (0..40).step_by(5).count();
    // Announce and result of each of the 40, their repeats, and the 6 id-less pairs.
    assert_eq!(
        in_records + repeats,
        2 * 40 + completed_repeats + 2 * 6,
        "{}",
        clean.show()
    );
    assert!(repeats <= completed_repeats, "{}", clean.show());

    // A record removed: its positions are missing, named by topic, partition and offset.
    let victim_at = records
        .iter()
        .position(|m| m.json()["streamId"].is_string())
        .expect("a record with an id");
    let victim: ToolCallRecord =
        serde_json::from_slice(records[victim_at].payload.as_deref().unwrap()).unwrap();
    let cut = format!("{}-cut", s.topics.records);
    {
        let (s2, records, cut) = (s.clone(), records.clone(), cut.clone());
        tokio::task::spawn_blocking(move || {
            copy_topic(&s2, &records, &cut, |i| i == victim_at, &[])
        })
        .await
        .unwrap();
    }
    let ran = audit(topic_args(&cut, &s.topics.dlq)).await.unwrap();
    assert_eq!(ran.code, 1, "{}", ran.show());
    let origin = match &victim.provenance.0[0] {
        toolcalls_model::record::Origin::Topic(t) => t.clone(),
        other => panic!("a processor record names topics: {other:?}"),
    };
    let want = format!(
        "missing     {}/{}@{}: ",
        origin.topic, origin.partition, origin.offsets[0]
    );
    assert!(ran.stdout.contains(&want), "{want}\n{}", ran.show());
    assert!(
        ran.stdout
            .contains(&format!("its record would be {}", victim.id())),
        "{}",
        ran.show()
    );

    // A dead letter removed: its input is neither in a record nor dead-lettered.
    let gone = &dlq[0];
    let dlq_cut = format!("{}-cut", s.topics.dlq);
    {
        let (s2, dlq, dlq_cut) = (s.clone(), dlq.clone(), dlq_cut.clone());
        tokio::task::spawn_blocking(move || copy_topic(&s2, &dlq, &dlq_cut, |i| i == 0, &[]))
            .await
            .unwrap();
    }
    let ran = audit(topic_args(&s.topics.records, &dlq_cut))
        .await
        .unwrap();
    assert_eq!(ran.code, 1, "{}", ran.show());
    let want = format!(
        "undecodable {}/{}@{}: ",
        gone.headers["toolcalls.source.topic"],
        gone.headers["toolcalls.source.partition"],
        gone.headers["toolcalls.source.offset"]
    );
    assert!(ran.stdout.contains(&want), "{want}\n{}", ran.show());
    assert!(ran.stdout.contains("1 discrepancies"), "{}", ran.show());

    // A record published twice with different content.
    let twice = format!("{}-twice", s.topics.records);
    let first = &records[0];
    let changed = String::from_utf8(first.payload.clone().unwrap())
        .unwrap()
        .replacen(r#""eventsMerged":"#, r#""eventsMerged":1"#, 1);
    let extra = vec![(first.key.clone().unwrap(), changed.into_bytes())];
    {
        let (s2, records, twice) = (s.clone(), records.clone(), twice.clone());
        tokio::task::spawn_blocking(move || copy_topic(&s2, &records, &twice, |_| false, &extra))
            .await
            .unwrap();
    }
    let ran = audit(topic_args(&twice, &s.topics.dlq)).await.unwrap();
    assert_eq!(ran.code, 1, "{}", ran.show());
    let want = format!(
        "conflict    record {} revision 1 was published twice",
        first.key_str()
    );
    assert!(ran.stdout.contains(&want), "{want}\n{}", ran.show());

    // A record published under another key than its id: compaction would keep it beside the
    // record whose id that key is, or replace that record with it.
    let rekeyed = format!("{}-rekeyed", s.topics.records);
    let (moved, other) = (&records[0], &records[1]);
    assert_ne!(moved.key, other.key);
    let extra = vec![(other.key.clone().unwrap(), moved.payload.clone().unwrap())];
    {
        let (s2, records, rekeyed) = (s.clone(), records.clone(), rekeyed.clone());
        tokio::task::spawn_blocking(move || {
            copy_topic(&s2, &records, &rekeyed, |i| i == 0, &extra)
        })
        .await
        .unwrap();
    }
    let ran = audit(topic_args(&rekeyed, &s.topics.dlq)).await.unwrap();
    assert_eq!(ran.code, 1, "{}", ran.show());
    let want = format!(
        "bad record  {rekeyed}/0@{}: its key is \"{}\", not its id {}",
        records.len() - 1,
        other.key_str(),
        moved.key_str()
    );
    assert!(ran.stdout.contains(&want), "{want}\n{}", ran.show());
    assert!(ran.stdout.contains("1 discrepancies"), "{}", ran.show());
}

/// The documented long run: `AUDIT_CALLS=500000 cargo test --release --test audit -- --ignored
/// --nocapture` publishes that many calls (an announce and a result each, and a repeat of every
/// tenth announce: about 1.05 million input events) through the processor and times the audit of
/// its topics. Not part of the default run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a long run: publishes about a million events"]
async fn a_million_events_through_the_processor_audit_in_seconds() {
    let calls: usize = std::env::var("AUDIT_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500_000);
    let s = settings("audit-big");
    create_topics(&s, 4).await;
    let sessions = 100;
    let (announces, completions) = synth("big", sessions, calls / sessions);
    let repeats: Vec<Event> = announces.iter().step_by(10).cloned().collect();
    let n = announces.len() + completions.len() + repeats.len();
    {
        let s = s.clone();
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            // A producer whose queue takes them all (the harness's holds 100,000).
            let p: rdkafka::producer::ThreadedProducer<rdkafka::producer::DefaultProducerContext> =
                rdkafka::config::ClientConfig::new()
                    .set("bootstrap.servers", &broker().addr)
                    .set("linger.ms", "20")
                    .set("compression.type", "lz4")
                    .set("queue.buffering.max.messages", "2000000")
                    .set("queue.buffering.max.kbytes", "2097151")
                    .create()
                    .expect("producer");
            for (topic, events) in [
                (&s.topics.announce, &announces),
                (&s.topics.completion, &completions),
                (&s.topics.announce, &repeats),
            ] {
                for e in events.iter() {
                    let payload = e.encode();
                    p.send(
                        BaseRecord::to(topic)
                            .key(e.session.as_str())
                            .payload(&payload),
                    )
                    .map_err(|(e, _)| e)
                    .expect("enqueue");
                }
            }
            p.flush(Duration::from_secs(300)).expect("flush");
            println!(
                "published {n} events in {:.1} s",
                started.elapsed().as_secs_f64()
            );
        })
        .await
        .unwrap();
    }
    let mut proc = Proc::spawn(&s, "big", None);
    let started = Instant::now();
    let (group, a, c) = (
        s.group.clone(),
        s.topics.announce.clone(),
        s.topics.completion.clone(),
    );
    let total = (calls + calls.div_ceil(10)) as i64;
    tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(600);
        while committed_total(&group, &a) < total || committed_total(&group, &c) < calls as i64 {
            assert!(
                Instant::now() < deadline,
                "the processor did not catch up in 10 minutes"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    })
    .await
    .unwrap();
    println!("processed in {:.1} s", started.elapsed().as_secs_f64());
    assert!(proc.terminate().success());
    let args = audit_args(&s, &s.topics.records, &s.topics.dlq);
    let started = Instant::now();
    let ran = tokio::task::spawn_blocking(move || {
        run(&args.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await
    .unwrap();
    println!(
        "audit of {n} input events: {:.1} s\n{}",
        started.elapsed().as_secs_f64(),
        ran.stdout
    );
    assert_eq!(ran.code, 0, "{}", ran.show());
}

/// A record that went missing under an id a later record reuses (two records at one revision,
/// the newest kept, as a compacted topic or an upsert keeps them) leaves events that come before
/// the kept record's own: named, not counted as repeats. And a record that lists another call's
/// event (its lines moved, or the inputs reordered under it) is named too.
#[test]
fn a_record_lost_under_its_id_or_holding_another_calls_events_is_named() {
    let dir = scratch_dir("superseded-and-mixed");
    // A repeat of c1's announce after its record went out and c1 was forgotten — here by the
    // cap on remembered calls, while the repeat is too recent to be taken for one by its age —
    // makes a second record under c1's id.
    let input = dir.join("events.jsonl");
    let announce = event("announce", "c1", 0, r#","tool":"T","args":{}"#);
    write_lines(
        &input,
        &[
            announce.clone(),
            event("completion", "c1", 1_000, r#","result":"ok""#),
            event("announce", "c2", 2_000, r#","tool":"T","args":{}"#),
            event("completion", "c2", 3_000, r#","result":"ok""#),
            announce,
        ],
    );
    let records = dir.join("records.jsonl");
    let local = run(&[
        "local",
        s(&input),
        "-o",
        s(&records),
        "-q",
        "--max-remembered",
        "1",
    ]);
    assert_eq!(local.code, 0, "{}", local.show());
    let lines: Vec<String> = std::fs::read_to_string(&records)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let c1 = |l: &&String| l.contains(r#""streamId":"c1""#);
    assert_eq!(
        lines.iter().filter(c1).count(),
        2,
        "the forgotten call's repeat made a record"
    );
    let audit = run(&["audit", s(&input), "--records", s(&records)]);
    assert_eq!(audit.code, 1, "{}", audit.show());
    assert!(
        audit.stdout.contains("conflict    record"),
        "{}",
        audit.show()
    );
    // The newest kept: the result "ok" is in no record any more.
    let kept = dir.join("kept.jsonl");
    let first = lines.iter().position(|l| c1(&l)).unwrap();
    let newest: Vec<String> = [&lines[..first], &lines[first + 1..]].concat();
    write_lines(&kept, &newest);
    let audit = run(&["audit", s(&input), "--records", s(&kept)]);
    assert_eq!(audit.code, 1, "{}", audit.show());
    let want = format!("superseded  {}:1: announce", input.display());
    assert!(audit.stdout.contains(&want), "{want}: {}", audit.show());

    // Two calls; the run's records audited against the inputs with the results swapped.
    let two = dir.join("two.jsonl");
    let calls = [
        event("announce", "c1", 0, r#","tool":"T","args":{}"#),
        event("announce", "c2", 100, r#","tool":"T","args":{"a":1}"#),
        event("completion", "c1", 1_000, r#","result":"one""#),
        event("completion", "c2", 1_100, r#","result":"two""#),
    ];
    write_lines(&two, &calls);
    let records = dir.join("two-records.jsonl");
    let local = run(&["local", s(&two), "-o", s(&records), "-q"]);
    assert_eq!(local.code, 0, "{}", local.show());
    let audit = run(&["audit", s(&two), "--records", s(&records)]);
    assert_eq!(audit.code, 0, "{}", audit.show());
    let swapped = [&calls[..2], &[calls[3].clone(), calls[2].clone()]].concat();
    write_lines(&two, &swapped);
    let audit = run(&["audit", s(&two), "--records", s(&records)]);
    assert_eq!(audit.code, 1, "{}", audit.show());
    assert_eq!(
        audit.stdout.matches("mixed ids   record").count(),
        2,
        "{}",
        audit.show()
    );

    // Another tool under a pending call's id: refused by the correlator, said by `local` on
    // stderr, in no output: the audit names it.
    let refused = dir.join("refused.jsonl");
    write_lines(
        &refused,
        &[
            event("announce", "c1", 0, r#","tool":"T","args":{}"#),
            event("announce", "c1", 500, r#","tool":"U","args":{}"#),
            event("completion", "c1", 1_000, r#","result":"one""#),
        ],
    );
    let records = dir.join("refused-records.jsonl");
    let local = run(&["local", s(&refused), "-o", s(&records)]);
    assert!(
        local.stderr.contains("conflicting_call_id"),
        "{}",
        local.show()
    );
    let audit = run(&["audit", s(&refused), "--records", s(&records)]);
    assert_eq!(audit.code, 1, "{}", audit.show());
    let want = format!("refused     {}:2: announce", refused.display());
    assert!(audit.stdout.contains(&want), "{want}: {}", audit.show());

    // The same once the call's record is out, while the call is remembered; a copy of its own
    // announce then is a late repeat, which the audit accounts for.
    write_lines(
        &refused,
        &[
            event("announce", "c1", 0, r#","tool":"T","args":{}"#),
            event("completion", "c1", 1_000, r#","result":"one""#),
            event("announce", "c1", 2_000, r#","tool":"U","args":{}"#),
            event("announce", "c1", 0, r#","tool":"T","args":{}"#),
        ],
    );
    let local = run(&["local", s(&refused), "-o", s(&records)]);
    assert!(
        local.stderr.contains("conflicting_call_id") && local.stderr.contains("late 1"),
        "{}",
        local.show()
    );
    let audit = run(&["audit", s(&refused), "--records", s(&records)]);
    assert_eq!(audit.code, 1, "{}", audit.show());
    let want = format!("refused     {}:3: announce", refused.display());
    assert!(audit.stdout.contains(&want), "{want}: {}", audit.show());
    let said = audit.stdout.lines().filter(|l| l.starts_with("refused "));
    assert_eq!(said.count(), 1, "{}", audit.show());
}

/// A file named twice (overlapping globs, a link beside it) is read once by `local` and by the
/// audit alike, and said: read twice, every event would repeat itself under the same name.
#[test]
fn a_file_named_twice_is_read_once_and_audits_clean() {
    let dir = scratch_dir("named-twice");
    let input = dir.join("events.jsonl");
    write_lines(&input, &generated_events(40));
    let link = dir.join("link.jsonl");
    std::os::unix::fs::symlink(&input, &link).unwrap();
    let records = dir.join("records.jsonl");
    let once = dir.join("once.jsonl");
    let local = run(&["local", s(&input), "-o", s(&once), "-q"]);
    assert_eq!(local.code, 0, "{}", local.show());
    let local = run(&[
        "local",
        s(&input),
        s(&link),
        s(&input),
        "-o",
        s(&records),
        "-q",
    ]);
    assert_eq!(local.code, 0, "{}", local.show());
    assert_eq!(
        local.stderr.matches("read once").count(),
        2,
        "{}",
        local.show()
    );
    assert_eq!(
        std::fs::read(&records).unwrap(),
        std::fs::read(&once).unwrap(),
        "the records of one reading"
    );
    let audit = run(&["audit", s(&input), s(&input), "--records", s(&records)]);
    assert_eq!(audit.code, 0, "{}", audit.show());
    assert!(audit.stderr.contains("read once"), "{}", audit.show());
}

/// A `toolcalls local` run's `--dead-letters` file names every input it could not use — an event
/// the correlator refused (an id of another tool's call, facts past `--max-facts-bytes`), a line
/// that is no event (not JSON, a lone surrogate in a name) — as the processor's dead-letter topic
/// does, the same with one thread or two; given to the audit, it accounts for them and the run
/// audits clean. Without it the refusals are discrepancies, and a bad line the file lacks is one.
#[test]
fn a_local_runs_dead_letters_account_for_what_it_refused() {
    let dir = scratch_dir("local-dead-letters");
    let reason = "r".repeat(400);
    let lines = vec![
        event("announce", "c1", 0, r#","tool":"T","args":{}"#),
        event("announce", "c1", 10, r#","tool":"Other","args":{}"#),
        "not json".to_owned(),
        event(
            "hook_decision",
            "c1",
            20,
            &format!(r#","hook":"pre","decision":"allow","reason":"{reason}""#),
        ),
        event("completion", "c1", 30, r#","result":"ok""#),
        event("announce", "c2", 40, r#","tool":"T","args":{}"#).replace(r#""x""#, r#""\ud800""#),
    ];
    let input = dir.join("events.jsonl");
    write_lines(&input, &lines);
    let mut files = Vec::new();
    for threads in ["1", "2"] {
        let records = dir.join(format!("records-{threads}.jsonl"));
        let dead = dir.join(format!("dead-{threads}.jsonl"));
        let local = run(&[
            "local",
            s(&input),
            "-o",
            s(&records),
            "--dead-letters",
            s(&dead),
            "--max-facts-bytes",
            "300",
            "--threads",
            threads,
        ]);
        assert_eq!(local.code, 0, "{}", local.show());
        files.push((records, dead));
    }
    let (records, dead) = &files[0];
    let written = std::fs::read_to_string(dead).unwrap();
    assert_eq!(written, std::fs::read_to_string(&files[1].1).unwrap());
    let letters: Vec<serde_json::Value> = written
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let said: Vec<(i64, &str)> = letters
        .iter()
        .map(|d| (d["line"].as_i64().unwrap(), d["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        said,
        [
            (2, "conflicting_call_id"),
            (3, "not_json"),
            (4, "call_too_large"),
            (6, "invalid_field")
        ],
        "{written}"
    );
    assert!(letters
        .iter()
        .all(|d| d["input"] == s(&input) && d["error"].as_str().is_some_and(|e| !e.is_empty())));

    let audit_with = |dead: &Path| {
        run(&[
            "audit",
            s(&input),
            "-r",
            s(records),
            "--dead-letters",
            s(dead),
        ])
    };
    let audit = audit_with(dead);
    assert_eq!(audit.code, 0, "{}", audit.show());
    assert!(audit.stdout.contains("4 dead-lettered"), "{}", audit.show());
    let without = run(&["audit", s(&input), "-r", s(records)]);
    assert_eq!(without.code, 1, "{}", without.show());
    assert!(
        without.stdout.contains("refused     "),
        "{}",
        without.show()
    );
    // A dead-letter file changed: the audit fails, saying `want` of line `line`.
    let changed = |name: &str, text: String, line: u32, want: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let audit = audit_with(&path);
        assert_eq!(audit.code, 1, "{}", audit.show());
        let want = format!("{}:{line}: {want}", input.display());
        assert!(audit.stdout.contains(&want), "{want}: {}", audit.show());
    };
    // One that lacks a bad line does not account for it.
    let kept: Vec<&str> = written
        .lines()
        .filter(|l| !l.contains("not_json"))
        .collect();
    let want = "not a valid event (not_json)";
    changed("short.jsonl", kept.join("\n"), 3, want);
    // One that names a line past the end of the input names nothing there.
    let past = written.replace(r#""line":3,"#, r#""line":999,"#);
    let want = "named by a dead letter (not_json), but the input holds nothing there";
    changed("past.jsonl", past, 999, want);
    // Reasons swapped: a valid event is no `not_json`, and a line that is not JSON was no
    // correlator's refusal.
    let swapped = written
        .replace("conflicting_call_id", "was_refused")
        .replace("not_json", "conflicting_call_id")
        .replace("was_refused", "not_json");
    let want = "dead-lettered as not_json, but the input there is a valid event";
    changed("swapped.jsonl", swapped.clone(), 2, want);
    let want =
        "dead-lettered as conflicting_call_id, but the input there is not a valid event (not_json)";
    changed("swapped.jsonl", swapped, 3, want);
}

/// Retries collapsed by an idempotency key: a result of an attempt whose record lists another
/// attempt's is late when the correlator takes it as late — once an attempt succeeded, when it
/// says what a listed result says, when its attempt came before the one answered — and each run
/// audits clean. A records file that lost the revision carrying a later attempt's success does
/// not: that result is missing.
#[test]
fn a_retrys_result_is_late_or_missing_as_the_attempts_say() {
    let dir = scratch_dir("retries");
    let keyed = r#","tool":"pay","args":{"a":1},"sideEffects":{"level":"write","idempotent":false,"idempotencyKey":"k1"}"#;
    let announce = |id: &str, ms| event("announce", id, ms, keyed);
    let result = |id: &str, ms, says: &str, error: bool| {
        let extra = format!(r#","result":"{says}","isError":{error}"#);
        event("completion", id, ms, &extra)
    };
    let runs = [
        // Failed, then succeeded: the success is the outcome (revision 3).
        [
            announce("c1", 0),
            result("c1", 1, "fail", true),
            announce("c2", 2),
            result("c2", 3, "ok", false),
        ],
        // Failed the same way twice: the second result is late.
        [
            announce("c1", 0),
            result("c1", 1, "E", true),
            announce("c2", 2),
            result("c2", 3, "E", true),
        ],
        // The retry's result before the first attempt's: the first attempt's is late.
        [
            announce("c1", 0),
            announce("c2", 1),
            result("c2", 2, "B", true),
            result("c1", 3, "A", true),
        ],
        // Succeeded, then a retry's "already done": late.
        [
            announce("c1", 0),
            result("c1", 1, "ok", false),
            announce("c2", 2),
            result("c2", 3, "already done", false),
        ],
    ];
    for (i, lines) in runs.iter().enumerate() {
        let run_dir = dir.join(i.to_string());
        std::fs::create_dir_all(&run_dir).unwrap();
        let (input, records, local) = local_run(&run_dir, lines);
        assert_eq!(local.code, 0, "{}", local.show());
        let audit = run(&["audit", s(&input), "-r", s(&records)]);
        assert_eq!(audit.code, 0, "run {i}: {}", audit.show());
        if i > 0 {
            assert!(
                audit.stdout.contains("1 late for their record"),
                "run {i}: {}",
                audit.show()
            );
        }
    }
    // The first run's records without its last revision.
    let input = dir.join("0/events.jsonl");
    let all = std::fs::read_to_string(dir.join("0/records.jsonl")).unwrap();
    assert_eq!(all.lines().count(), 3, "{all}");
    let cut = dir.join("cut.jsonl");
    std::fs::write(
        &cut,
        all.lines()
            .take(2)
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
    )
    .unwrap();
    let audit = run(&["audit", s(&input), "-r", s(&cut)]);
    assert_eq!(audit.code, 1, "{}", audit.show());
    let want = format!("missing     {}:4: completion", input.display());
    assert!(audit.stdout.contains(&want), "{want}: {}", audit.show());
}

/// What a record lists must fit it: events of its own thread (Codex exec numbers its calls per
/// thread), and, without a call id, of its own tool, with one result; and a record names its
/// source and session. Records moved, merged or stripped that way are named.
#[test]
fn events_put_in_a_record_they_do_not_fit_are_named() {
    let dir = scratch_dir("fit");
    let at = |thread: &str, kind: &str, id: &str, ms: i64, extra: &str| {
        event(kind, id, ms, extra).replace(
            r#""session":"x""#,
            &format!(r#""session":"x","thread":"{thread}""#),
        )
    };
    let lines = vec![
        at("t1", "announce", "item_0", 0, r#","tool":"ls","args":{}"#),
        at("t1", "completion", "item_0", 1, r#","result":"a""#),
        at("t2", "announce", "item_0", 2, r#","tool":"ls","args":{}"#),
        at("t2", "completion", "item_0", 3, r#","result":"b""#),
        event("announce", "", 4, r#","tool":"cat","args":{"f":1}"#).replace(r#""callId":"","#, ""),
        event("completion", "", 5, r#","tool":"cat","result":"c""#).replace(r#""callId":"","#, ""),
        event("announce", "", 6, r#","tool":"rm","args":{"f":2}"#).replace(r#""callId":"","#, ""),
        event("completion", "", 7, r#","tool":"rm","result":"d""#).replace(r#""callId":"","#, ""),
    ];
    let (input, records, local) = local_run(&dir, &lines);
    assert_eq!(local.code, 0, "{}", local.show());
    let clean = run(&["audit", s(&input), "-r", s(&records)]);
    assert_eq!(clean.code, 0, "{}", clean.show());
    let mut by_line: Vec<serde_json::Value> = std::fs::read_to_string(&records)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    by_line.sort_by_key(|r| r["provenance"][0]["lines"][0].as_i64());
    let write = |name: &str, records: &[serde_json::Value]| {
        let path = dir.join(name);
        let text: String = records.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(&path, text).unwrap();
        run(&["audit", s(&input), "-r", s(&path), "--max-report", "0"])
    };
    let lines_of = |r: &mut serde_json::Value, lines: &[i64]| {
        r["provenance"] = serde_json::json!([{"file": s(&input), "lines": lines}]);
    };

    // Thread t2's call put into thread t1's record.
    let mut merged = vec![by_line[0].clone(), by_line[2].clone(), by_line[3].clone()];
    lines_of(&mut merged[0], &[1, 2, 3, 4]);
    let audit = write("threads.jsonl", &merged);
    assert_eq!(audit.code, 1, "{}", audit.show());
    let want = format!("scope       {}:3:", input.display());
    assert!(audit.stdout.contains(&want), "{want}: {}", audit.show());

    // The rm call's result put into the cat call's record, and the rm record dropped.
    let mut swapped = vec![by_line[0].clone(), by_line[1].clone(), by_line[2].clone()];
    lines_of(&mut swapped[2], &[5, 6, 8]);
    let audit = write("tools.jsonl", &swapped);
    assert_eq!(audit.code, 1, "{}", audit.show());
    let want = format!("other tool  {}:8:", input.display());
    assert!(audit.stdout.contains(&want), "{want}: {}", audit.show());
    assert!(
        audit.stdout.contains("two results record"),
        "{}",
        audit.show()
    );
    // The same in a record that says it collapsed a retry: a retry's announce may name another
    // tool, its results without an id may not.
    swapped[2]["correlation"]["attempts"] = serde_json::json!(2);
    let audit = write("retried.jsonl", &swapped);
    assert_eq!(audit.code, 1, "{}", audit.show());
    assert!(audit.stdout.contains(&want), "{want}: {}", audit.show());
    assert!(
        audit.stdout.contains("two results record"),
        "{}",
        audit.show()
    );

    // A record that names no session: its checks cannot be made, which is itself named.
    let mut nameless = by_line.clone();
    nameless[1]["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("session");
    let audit = write("nameless.jsonl", &nameless);
    assert_eq!(audit.code, 1, "{}", audit.show());
    assert!(
        audit.stdout.contains("names no source or no session"),
        "{}",
        audit.show()
    );
}

/// The record id of a call without an id derives from its position, numbered by the order the
/// run was given its files: audited in another order, or one file alone, the run is still clean.
#[test]
fn files_audited_in_another_order_than_local_read_them_audit_clean() {
    let dir = scratch_dir("order");
    let idless = |ms: i64, tool: &str| {
        [
            event(
                "announce",
                "",
                ms,
                &format!(r#","tool":"{tool}","args":{{}}"#),
            ),
            event(
                "completion",
                "",
                ms + 1,
                &format!(r#","tool":"{tool}","result":"r""#),
            ),
        ]
        .map(|e| e.replace(r#""callId":"","#, ""))
    };
    let (a, b) = (dir.join("a.jsonl"), dir.join("b.jsonl"));
    write_lines(&a, &idless(0, "ls"));
    write_lines(
        &b,
        &idless(10, "cat").map(|e| e.replace(r#""session":"x""#, r#""session":"y""#)),
    );
    let records = dir.join("records.jsonl");
    let local = run(&["local", s(&a), s(&b), "-o", s(&records)]);
    assert_eq!(local.code, 0, "{}", local.show());
    for files in [vec![s(&b), s(&a)], vec![s(&b)]] {
        let audit = run(&[&["audit"], &files[..], &["-r", s(&records)]].concat());
        assert_eq!(audit.code, 0, "{files:?}: {}", audit.show());
    }
}

/// A hook decision or an approval its record holds in its content — the deny that made it
/// `Denied`, the decision its approval shows — but no longer lists, is named: not taken for a
/// fact that came after its call closed.
#[test]
fn a_fact_its_record_holds_but_does_not_list_is_named() {
    let dir = scratch_dir("unlisted-facts");
    let lines = vec![
        event("announce", "c1", 0, r#","tool":"rm","args":{"path":"/"}"#),
        event(
            "hook_decision",
            "c1",
            1,
            r#","hook":"policy","decision":"deny","reason":"dangerous""#,
        ),
        event("announce", "c2", 2, r#","tool":"ls","args":{}"#),
        event("approval", "c2", 3, r#","decision":"denied","by":"bob""#),
        r#"{"v":1,"kind":"turn_end","source":"s","session":"x","time":"2026-01-01T00:00:09Z"}"#
            .to_owned(),
    ];
    let (input, records, local) = local_run(&dir, &lines);
    assert_eq!(local.code, 0, "{}", local.show());
    let clean = run(&["audit", s(&input), "-r", s(&records)]);
    assert_eq!(clean.code, 0, "{}", clean.show());
    let stripped: String = std::fs::read_to_string(&records)
        .unwrap()
        .lines()
        .map(|l| {
            let mut r: serde_json::Value = serde_json::from_str(l).unwrap();
            let lines = r["provenance"][0]["lines"].as_array_mut().unwrap();
            lines.retain(|n| n != 2 && n != 4);
            format!("{r}\n")
        })
        .collect();
    let dropped = dir.join("dropped.jsonl");
    std::fs::write(&dropped, stripped).unwrap();
    let audit = run(&["audit", s(&input), "-r", s(&dropped)]);
    assert_eq!(audit.code, 1, "{}", audit.show());
    for line in [2, 4] {
        let want = format!("unlisted    {}:{line}:", input.display());
        assert!(audit.stdout.contains(&want), "{want}: {}", audit.show());
    }
}

/// Genuine runs the audit once took for incomplete (found by a review of its checks): late
/// events between a call and its retry's revision, an id-less result answering a collapsed
/// call's first attempt, retries applied in event-time order by the reorder window, a result
/// linked by its checksum under another tool's name, and files whose record keys share an
/// offset — each audited clean, its files also in reverse order and by absolute path.
#[test]
fn genuine_runs_with_retries_checksums_and_files_in_any_order_audit_clean() {
    let dir = scratch_dir("genuine");
    let ev = |t: &str, fields: &str| {
        format!(r#"{{"v":1,"source":"s","session":"S","time":"2025-01-01T00:00:{t}Z",{fields}}}"#)
    };
    let keyed = r#""tool":"t","args":{"a":1},"sideEffects":{"idempotencyKey":"K"}"#;
    let checksum = toolcalls_model::checksum_of("t", Some(&serde_json::json!({"a": 1})));
    let cases: Vec<(&str, Vec<Vec<String>>)> = vec![
        (
            "",
            vec![vec![
                ev("01", &format!(r#""kind":"announce","callId":"A",{keyed}"#)),
                ev("02", r#""kind":"completion","callId":"A","result":"ok""#),
                ev(
                    "03",
                    r#""kind":"hook_decision","callId":"A","hook":"post","decision":"allow""#,
                ),
                ev(
                    "03.5",
                    r#""kind":"completion","callId":"A","result":"ok again""#,
                ),
                ev("05", &format!(r#""kind":"announce","callId":"B",{keyed}"#)),
            ]],
        ),
        (
            "",
            vec![vec![
                ev("01", &format!(r#""kind":"announce","callId":"A",{keyed}"#)),
                ev("02", &format!(r#""kind":"announce","callId":"B",{keyed}"#)),
                ev(
                    "03",
                    r#""kind":"completion","tool":"t","result":"x","isError":true"#,
                ),
                ev(
                    "04",
                    r#""kind":"completion","callId":"A","result":"fail","isError":true"#,
                ),
            ]],
        ),
        (
            "--max-disorder=10s",
            vec![vec![
                ev("03", &format!(r#""kind":"announce","callId":"B",{keyed}"#)),
                ev("01", &format!(r#""kind":"announce","callId":"A",{keyed}"#)),
                ev(
                    "04",
                    r#""kind":"completion","callId":"B","result":"fail","isError":true"#,
                ),
                ev(
                    "05",
                    r#""kind":"completion","callId":"A","result":"fail2","isError":true"#,
                ),
            ]],
        ),
        (
            "",
            vec![
                vec![ev(
                    "01",
                    &format!(r#""kind":"announce","callId":"A",{keyed}"#),
                )],
                vec![
                    ev("03", &format!(r#""kind":"announce","callId":"B",{keyed}"#)),
                    ev(
                        "04",
                        r#""kind":"completion","callId":"B","result":"fail","isError":true"#,
                    ),
                    ev(
                        "05",
                        r#""kind":"completion","callId":"A","result":"fail2","isError":true"#,
                    ),
                ],
            ],
        ),
        // Attempts applied in input order against their event times (no reorder window).
        (
            "",
            vec![vec![
                ev(
                    "25.5",
                    &format!(r#""kind":"announce","callId":"A",{keyed}"#),
                ),
                ev(
                    "22.5",
                    &format!(r#""kind":"announce","callId":"B",{keyed}"#),
                ),
                ev(
                    "22.6",
                    r#""kind":"completion","callId":"B","result":"no","isError":true"#,
                ),
                ev("25.6", r#""kind":"completion","callId":"A","result":"ok""#),
            ]],
        ),
        // The first attempt's result in a later file, its announce in the first.
        (
            "",
            vec![
                vec![ev(
                    "27.6",
                    &format!(r#""kind":"announce","callId":"A",{keyed}"#),
                )],
                vec![
                    ev(
                        "27.5",
                        &format!(r#""kind":"announce","callId":"B",{keyed}"#),
                    ),
                    ev(
                        "27.7",
                        r#""kind":"completion","callId":"B","result":"no","isError":true"#,
                    ),
                    ev("30", r#""kind":"completion","callId":"A","result":"ok""#),
                ],
            ],
        ),
        // A third attempt's result says what the record holds: late, but the attempt answered.
        (
            "",
            vec![vec![
                ev("01", &format!(r#""kind":"announce","callId":"A",{keyed}"#)),
                ev("02", &format!(r#""kind":"announce","callId":"B",{keyed}"#)),
                ev("03", &format!(r#""kind":"announce","callId":"C",{keyed}"#)),
                ev(
                    "04",
                    r#""kind":"completion","callId":"A","result":"x","isError":true"#,
                ),
                ev(
                    "05",
                    r#""kind":"completion","callId":"C","result":"x","isError":true"#,
                ),
                ev("06", r#""kind":"completion","callId":"B","result":"ok""#),
            ]],
        ),
        // A first attempt without an id takes its id from the result that came first; another
        // result under that id is late, the retry's success revises the record.
        (
            "",
            vec![vec![
                ev(
                    "01",
                    r#""kind":"completion","callId":"X","tool":"t","result":"no","isError":true"#,
                ),
                ev("02", &format!(r#""kind":"announce",{keyed}"#)),
                ev("03", r#""kind":"completion","callId":"X","result":"ok""#),
                ev("04", &format!(r#""kind":"announce","callId":"Y",{keyed}"#)),
                ev("05", r#""kind":"completion","callId":"Y","result":"ok""#),
            ]],
        ),
        // A denied call's record revised by its result, a fact late in between.
        (
            "",
            vec![vec![
                ev("01", &format!(r#""kind":"announce","callId":"A",{keyed}"#)),
                ev(
                    "01.5",
                    r#""kind":"approval","callId":"A","decision":"denied""#,
                ),
                ev(
                    "40",
                    r#""kind":"announce","callId":"Z","tool":"ls","args":{}"#,
                ),
                ev(
                    "02",
                    r#""kind":"hook_decision","callId":"A","hook":"pre","decision":"allow""#,
                ),
                ev("41", r#""kind":"completion","callId":"A","result":"ok""#),
                ev("42", r#""kind":"completion","callId":"Z","result":"ok""#),
            ]],
        ),
        (
            "",
            vec![vec![
                ev("01", r#""kind":"announce","tool":"t","args":{"a":1}"#),
                ev(
                    "02",
                    &format!(
                        r#""kind":"completion","tool":"functions.t","checksum":"{}","result":"ok""#,
                        checksum.as_str()
                    ),
                ),
            ]],
        ),
        (
            "",
            vec![
                vec![
                    ev("01", r#""kind":"announce","tool":"t","args":{"a":1}"#),
                    ev("02", r#""kind":"completion","tool":"u","result":"ok""#),
                ],
                vec![
                    ev("02.5", r#""kind":"turn_end","turn":"x""#),
                    ev("03", r#""kind":"announce","tool":"u","args":{}"#),
                ],
            ],
        ),
    ];
    for (i, (option, files)) in cases.iter().enumerate() {
        let case = dir.join(i.to_string());
        std::fs::create_dir_all(&case).unwrap();
        let paths: Vec<PathBuf> = (0..files.len())
            .map(|f| case.join(format!("in{f}.jsonl")))
            .collect();
        for (path, lines) in paths.iter().zip(files) {
            write_lines(path, lines);
        }
        let records = case.join("records.jsonl");
        let names: Vec<&str> = paths.iter().map(|p| s(p)).collect();
        let mut local = vec!["local"];
        local.extend(option.split_whitespace());
        local.extend(&names);
        local.extend(["-o", s(&records)]);
        let ran = run(&local);
        assert_eq!(ran.code, 0, "case {i}: {}", ran.show());
        let absolute: Vec<String> = paths
            .iter()
            .rev()
            .map(|p| std::fs::canonicalize(p).unwrap().display().to_string())
            .collect();
        let reversed: Vec<&str> = names.iter().rev().copied().collect();
        for order in [
            names.clone(),
            reversed,
            absolute.iter().map(String::as_str).collect(),
        ] {
            let audit = run(&[&["audit"], &order[..], &["-r", s(&records)]].concat());
            assert_eq!(audit.code, 0, "case {i}, {order:?}: {}", audit.show());
        }
    }
}

/// Tampered records the audit once passed: the revision an idempotent call's late result made
/// taken out, a later revision of another scope, a retry's announce or an early result's
/// announce left out of the provenance, and records that list no input position.
#[test]
fn revisions_of_another_scope_lost_announces_and_records_without_provenance_are_named() {
    use serde_json::Value;
    let dir = scratch_dir("tampered");
    // The records of `lines` through `local`, as JSON values, and an audit of them changed.
    let audit_changed = |name: &str, lines: &[String], change: &dyn Fn(&mut Vec<Value>)| {
        let case = dir.join(name);
        std::fs::create_dir_all(&case).unwrap();
        let (input, records, ran) = local_run(&case, lines);
        assert_eq!(ran.code, 0, "{}", ran.show());
        let clean = run(&["audit", s(&input), "-r", s(&records)]);
        assert_eq!(clean.code, 0, "{name}, untouched: {}", clean.show());
        let text = std::fs::read_to_string(&records).unwrap();
        let mut values: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        change(&mut values);
        let changed = case.join("changed.jsonl");
        let lines: Vec<String> = values.iter().map(Value::to_string).collect();
        write_lines(&changed, &lines);
        run(&["audit", s(&input), "-r", s(&changed)])
    };
    let keyed = r#","tool":"send","args":{"x":1},"sideEffects":{"level":"external_write","idempotent":false,"idempotencyKey":"k"}"#;
    let lines_of =
        |r: &mut Value| -> Vec<Value> { r["provenance"][0]["lines"].as_array().unwrap().clone() };

    // An idempotent call interrupted by its turn's end, then revised by its late result.
    let revised = [
        event("announce", "a1", 0, &format!(r#","turn":"t1"{keyed}"#)),
        format!(
            r#"{{"v":1,"kind":"turn_end","source":"s","session":"x","turn":"t1","time":"{}"}}"#,
            time(2_000)
        ),
        // Its session's clock moves past the turn's grace: the call closes, interrupted.
        event(
            "announce",
            "b",
            60_000,
            r#","turn":"t2","tool":"other","args":{}"#,
        ),
        event(
            "completion",
            "a1",
            61_000,
            r#","turn":"t1","result":"done""#,
        ),
    ];
    let ran = audit_changed("revision-lost", &revised, &|rs| {
        rs.retain(|r| r["metadata"]["revision"] != 2);
    });
    assert_eq!(ran.code, 1, "{}", ran.show());
    let want = "events.jsonl:4: completion source=s session=x callId=a1 is in no record";
    assert!(ran.stdout.contains(want), "{want}: {}", ran.show());
    // Read in reverse, the revisions audit as in order.
    let ran = audit_changed("reversed", &revised, &|rs| rs.reverse());
    assert_eq!(ran.code, 0, "{}", ran.show());
    assert!(
        ran.stdout.contains("1 later revisions, 0 identical copies"),
        "{}",
        ran.show()
    );
    // A revision that left out the announce, read before the one that lists it.
    let ran = audit_changed("dropped-read-first", &revised, &|rs| {
        let second = rs
            .iter()
            .position(|r| r["metadata"]["revision"] == 2)
            .unwrap();
        rs[second]["provenance"][0]["lines"] = serde_json::json!([4]);
        let moved = rs.remove(second);
        rs.insert(0, moved);
    });
    assert_eq!(ran.code, 1, "{}", ran.show());
    assert!(ran.stdout.contains("dropped     "), "{}", ran.show());
    assert!(
        ran.stdout.contains("events.jsonl:1: in record"),
        "{}",
        ran.show()
    );
    let ran = audit_changed("revised", &revised, &|rs| {
        let second = rs.iter_mut().find(|r| r["metadata"]["revision"] == 2);
        second.expect("a1's second revision")["metadata"]["session"] = "someone-else".into();
    });
    assert_eq!(ran.code, 1, "{}", ran.show());
    assert!(
        ran.stdout
            .contains("is not that of revision 1 of the same record"),
        "{}",
        ran.show()
    );

    // Line 2 left out of the first record's provenance.
    let drop_line_2 = |rs: &mut Vec<Value>| {
        let kept: Vec<Value> = lines_of(&mut rs[0])
            .into_iter()
            .filter(|l| l != 2)
            .collect();
        rs[0]["provenance"][0]["lines"] = kept.into();
    };

    // A retry collapsed into its call by the key, its result the call's.
    let retried = [
        event("announce", "a1", 0, keyed),
        event("announce", "a2", 1_000, keyed),
        event("completion", "a2", 2_000, r#","result":"done""#),
    ];
    let ran = audit_changed("retried", &retried, &drop_line_2);
    assert_eq!(ran.code, 1, "{}", ran.show());
    assert!(ran.stdout.contains("missing     "), "{}", ran.show());
    assert!(
        ran.stdout.contains("events.jsonl:2: announce"),
        "{}",
        ran.show()
    );

    // A result before its announce: the record lists both.
    let early = [
        event("completion", "x", 1_000, r#","result":"done""#),
        event("announce", "x", 0, r#","tool":"Read","args":{}"#),
    ];
    let ran = audit_changed("early", &early, &drop_line_2);
    assert_eq!(ran.code, 1, "{}", ran.show());
    assert!(
        ran.stdout.contains("events.jsonl:2: announce"),
        "{}",
        ran.show()
    );
    assert!(
        ran.stdout.contains("0 late for their record"),
        "{}",
        ran.show()
    );

    // A record made up, listing nothing; and a genuine one emptied into another.
    let two = [
        event("announce", "a", 0, r#","tool":"Read","args":{}"#),
        event("completion", "a", 1_000, r#","result":"one""#),
        event("announce", "b", 2_000, r#","tool":"Read","args":{}"#),
        event("completion", "b", 3_000, r#","result":"two""#),
    ];
    let ran = audit_changed("made-up", &two, &|rs| {
        let mut made_up = rs[0].clone();
        made_up["metadata"]["name"] = "11111111-2222-5333-8444-555555555555".into();
        made_up.as_object_mut().unwrap().remove("provenance");
        rs.push(made_up);
    });
    assert_eq!(ran.code, 1, "{}", ran.show());
    assert!(
        ran.stdout.contains("it lists no input position"),
        "{}",
        ran.show()
    );
    let ran = audit_changed("emptied", &two, &|rs| {
        let mut all = lines_of(&mut rs[0]);
        all.extend(lines_of(&mut rs[1]));
        rs[1]["provenance"][0]["lines"] = all.into();
        rs[0]["provenance"] = Value::Array(Vec::new());
    });
    assert_eq!(ran.code, 1, "{}", ran.show());
    assert!(
        ran.stdout.contains("it lists no input position"),
        "{}",
        ran.show()
    );
}

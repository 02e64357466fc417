//! The producers redact before anything leaves the process. A real Claude Code transcript gets
//! two secrets in a call's arguments and a broken line that quotes one; `toolcalls ingest`, once
//! and `--follow`ing, writes its events with the redaction rules. No secret is in the events or
//! in the messages, the follower writes the very events the one-shot run does, and the records
//! `toolcalls local` makes of the redacted events are those of the original events — the same
//! calls, joined the same way, under the checksum of the original arguments — but for the
//! redacted values. (`toolcalls receive` is checked against a broker in tests/receive.rs.)

#[path = "support/scratch.rs"]
mod scratch;

use scratch::Scratch;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BY_POINTER: &str = "hunter2-but-longer";
const BY_PATTERN: &str = "tok-0123456789abcdef";
const RULES: [&str; 4] = [
    "--redact-pointer",
    "/api_key",
    "--redact-pattern",
    "tok-[0-9a-f]{16}",
];

/// `toolcalls ARGS`, with none of the caller's `TOOLCALLS_*` variables.
fn toolcalls(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolcalls"));
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("TOOLCALLS_") {
            command.env_remove(var);
        }
    }
    let out = command
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run toolcalls");
    assert!(
        out.status.success(),
        "toolcalls {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The fixture with the secrets put into its first call's arguments, and a broken line quoting
/// one, in a scratch directory; `None` without the shared fixtures.
fn session_with_secrets(dir: &Path) -> Option<PathBuf> {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/claude-code/spotter-tool-heavy.jsonl");
    let text = std::fs::read_to_string(&fixture).ok()?;
    let needle = "\"type\":\"tool_use\"";
    let at = text.find(needle).expect("a tool call in the fixture");
    let input = at + text[at..].find("\"input\":{").expect("its arguments") + "\"input\":{".len();
    let injected = format!(
        "{}\"api_key\":\"{BY_POINTER}\",\"note\":\"use {BY_PATTERN} here\",{}{{\"type\":\"user\",\"note\":\"{BY_PATTERN}\n",
        &text[..input],
        &text[input..]
    );
    let file = dir.join("session.jsonl");
    std::fs::write(&file, injected).unwrap();
    Some(file)
}

/// The records of `toolcalls local` over v1 events, by name, without their provenance.
fn records_of(events: &Path) -> Vec<Value> {
    let out = toolcalls(&["local", events.to_str().unwrap()]);
    let mut records: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let mut r: Value = serde_json::from_str(l).unwrap();
            r.as_object_mut().unwrap().remove("provenance");
            r
        })
        .collect();
    records.sort_by_key(|r| r["metadata"]["name"].as_str().unwrap().to_owned());
    records
}

fn contains_secret(text: &str) -> bool {
    text.contains(BY_POINTER) || text.contains(BY_PATTERN)
}

#[test]
fn ingest_and_follow_send_no_secret_and_the_ledger_joins_as_before() {
    let dir = Scratch::new("producer-redaction");
    let Some(session) = session_with_secrets(&dir) else {
        println!(
            "skipped: ../shared/fixtures is missing (the shared fixtures live beside the project)"
        );
        return;
    };
    let session = session.to_str().unwrap();
    let (plain, redacted, followed) = (
        dir.join("plain.jsonl"),
        dir.join("redacted.jsonl"),
        dir.join("followed.jsonl"),
    );

    let out = toolcalls(&["ingest", session, "--out", plain.to_str().unwrap()]);
    let plain_text = std::fs::read_to_string(&plain).unwrap();
    assert!(
        plain_text.contains(BY_POINTER) && plain_text.contains(BY_PATTERN),
        "without rules the events carry the secrets"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(BY_PATTERN),
        "without rules the bad line's message quotes it"
    );

    let mut args = vec!["ingest", session, "--out", redacted.to_str().unwrap()];
    args.extend(RULES);
    let out = toolcalls(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!contains_secret(&stderr), "{stderr}");
    assert!(stderr.contains("1 bad lines"), "{stderr}");
    assert!(
        stderr.contains("1 events redacted before they were sent"),
        "{stderr}"
    );
    let redacted_text = std::fs::read_to_string(&redacted).unwrap();
    assert!(!contains_secret(&redacted_text), "{redacted_text}");
    assert_eq!(plain_text.lines().count(), redacted_text.lines().count());

    let mut args = vec![
        "ingest",
        "--follow",
        "--once",
        "--quiet",
        session,
        "--out",
        followed.to_str().unwrap(),
    ];
    args.extend(RULES);
    let out = toolcalls(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!contains_secret(&stderr), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&followed).unwrap(),
        redacted_text,
        "the follower sends what ingest sends"
    );

    // The same calls, joined the same way, under the original arguments' checksums.
    let (before, after) = (records_of(&plain), records_of(&redacted));
    assert_eq!(before.len(), after.len());
    let mut changed = 0;
    for (b, a) in before.iter().zip(&after) {
        for field in ["metadata", "checksum", "correlation", "streamId"] {
            assert_eq!(b[field], a[field], "{field} of {}", a["metadata"]["name"]);
        }
        assert_eq!(b["status"]["phase"], a["status"]["phase"]);
        if b != a {
            changed += 1;
            assert!(contains_secret(&b.to_string()));
            assert!(!contains_secret(&a.to_string()), "{a}");
            assert_eq!(a["spec"]["input"]["api_key"], "[REDACTED]");
            assert!(a["checksum"].is_string(), "{a}");
        }
    }
    assert_eq!(changed, 1, "one call held the secrets");
}

/// A follower knows what it delivered by what it read, not by what it sent: restarted with other
/// rules, a document it reads again (a Gemini CLI session is one JSON document, read whole at
/// every change) sends nothing again.
#[test]
fn a_follower_restarted_with_other_rules_sends_nothing_again() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/gemini-cli/agentcmd-session-453aa339.json");
    let Ok(text) = std::fs::read_to_string(&fixture) else {
        println!(
            "skipped: ../shared/fixtures is missing (the shared fixtures live beside the project)"
        );
        return;
    };
    let dir = Scratch::new("follow-rules");
    let session = dir.join("session.json");
    std::fs::write(&session, &text).unwrap();
    let (out, checkpoints) = (dir.join("events.jsonl"), dir.join("checkpoints"));
    let follow = |patterns: &[&str]| {
        let mut args = vec![
            "ingest",
            "--follow",
            "--once",
            "--quiet",
            session.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--checkpoint-dir",
            checkpoints.to_str().unwrap(),
        ];
        for p in patterns {
            args.extend(["--redact-pattern", p]);
        }
        toolcalls(&args);
        std::fs::read_to_string(&out).unwrap()
    };
    let first = follow(&["gemini-test"]);
    assert!(first.lines().count() > 2, "{first}");
    assert!(
        !first.contains("gemini-test") && first.contains("[REDACTED]"),
        "{first}"
    );

    // The session is saved again (its `lastUpdated` changes): read whole once more, with a
    // rule that redacts more of the same events.
    let updated = text.replacen("\"lastUpdated\": \"", "\"lastUpdated\": \"2", 1);
    let updated = if updated == text {
        text.replacen("\"lastUpdated\":\"", "\"lastUpdated\":\"2", 1)
    } else {
        updated
    };
    assert_ne!(updated, text, "the fixture has a lastUpdated");
    std::fs::write(&session, &updated).unwrap();
    let second = follow(&["gemini-test", "created"]);
    assert_eq!(second, first, "nothing sent again");
}

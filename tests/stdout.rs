//! What the commands do when their standard output fails under them: a reader that leaves
//! (`| head`) ends the run quietly with SIGPIPE's exit code; a full disk is an error with exit
//! code 2. Never a panic.

#[path = "support/scratch.rs"]
mod scratch;

use scratch::Scratch;
use std::io::{BufReader, Read};
use std::process::{Command, Stdio};

fn toolcalls() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolcalls"));
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("TOOLCALLS_") {
            command.env_remove(var);
        }
    }
    command
}

/// A reader that takes the first line and closes the pipe (`toolcalls local … | head -1`) ends
/// the run at once, quietly, with 141 (128 + SIGPIPE), as a program the signal kills would end:
/// no error message for a reader that left on purpose, and `set -o pipefail` still sees the
/// output cut short. Each command writes far more than a pipe holds, so it is still writing.
#[test]
fn a_reader_that_leaves_stops_the_run_quietly_with_sigpipes_code() {
    let dir = Scratch::new("reader-leaves");
    let events = dir.join("events.jsonl");
    let w = toolcalls_workload::generate(&toolcalls_workload::Spec {
        seed: 7,
        calls: 4_000,
        sessions: 64,
        ..Default::default()
    });
    std::fs::write(&events, w.lines.join("\n") + "\n").unwrap();
    let hooks = dir.join("hooks.jsonl");
    let hook = |i: usize| {
        format!(
            r#"{{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{{"command":"make test {i}"}},"tool_use_id":"toolu_{i}"}}"#
        )
    };
    let lines: String = (0..5_000).map(|i| hook(i) + "\n").collect();
    std::fs::write(&hooks, lines).unwrap();
    let (events, hooks) = (events.to_str().unwrap(), hooks.to_str().unwrap());
    // Its canonical text alone is more than a pipe holds (an argument can be 128 KiB at most).
    let long_tool = "T".repeat(60_000);
    let long_args = format!("\"{}\"", "a".repeat(60_000));
    for args in [
        vec!["local", "--threads", "1", events],
        vec!["local", "--threads", "2", events],
        vec![
            "ingest",
            "--format",
            "claude-code-hooks",
            "--out",
            "-",
            hooks,
        ],
        vec!["checksum", "--canonical", &long_tool, &long_args],
    ] {
        let mut child = toolcalls()
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 1];
        BufReader::new(child.stdout.take().unwrap())
            .read_exact(&mut first)
            .unwrap();
        // The reader has gone: what the child writes next fails with EPIPE.
        let mut stderr = String::new();
        let mut err = child.stderr.take().unwrap();
        err.read_to_string(&mut stderr).unwrap();
        let status = child.wait().unwrap();
        let what = &args[..args.len().min(3)];
        assert_eq!(status.code(), Some(141), "{what:?}: {status:?}\n{stderr}");
        assert!(
            !stderr.contains("error") && !stderr.contains("panicked"),
            "{what:?}: {stderr}"
        );
    }
}

/// A full disk under stdout is an error that says what failed, exit code 2, never a panic.
#[test]
fn a_full_disk_under_stdout_is_an_error_not_a_panic() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        eprintln!("skipped: this system has no /dev/full");
        return;
    };
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/session.jsonl");
    for args in [
        vec!["checksum", "--canonical", "read_file", r#"{"path":"/a"}"#],
        vec!["local", "--quiet", example],
    ] {
        let out = toolcalls()
            .args(&args)
            .stdin(Stdio::null())
            .stdout(full.try_clone().unwrap())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("No space left on device") && !stderr.contains("panicked"),
            "{args:?}: {stderr}"
        );
    }
}

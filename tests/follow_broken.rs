//! `ingest --follow` on files that are partly broken: it delivers what a one-shot `ingest` of the
//! same file delivers, and says what it cannot read instead of waiting on it in silence.

#[path = "support/scratch.rs"]
mod scratch;

use scratch::Scratch;
use std::path::Path;
use std::process::{Command, Output};

fn dir(name: &str) -> Scratch {
    Scratch::new(name)
}

fn toolcalls() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolcalls"));
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("TOOLCALLS_") {
            c.env_remove(k);
        }
    }
    c
}

fn sample(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("crates/adapters/tests/data")
            .join(name),
    )
    .unwrap()
}

/// `ingest` of `file` as `format` into `out`, with `--follow --once` or without.
fn ingest(format: &str, file: &Path, out: &Path, follow: Option<&Path>) -> Output {
    let _ = std::fs::remove_file(out);
    let mut c = toolcalls();
    c.args(["ingest", "--format", format]);
    if let Some(checkpoints) = follow {
        c.args(["--follow", "--once", "--checkpoint-dir"])
            .arg(checkpoints);
    }
    c.arg("--out").arg(out).arg(file).output().unwrap()
}

fn events(out: &Path) -> Vec<String> {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A transcript whose first line was cut (opening with `{`, like a JSON document) is still a
/// file of lines: the follower reads the lines after it, as `ingest` does.
#[test]
fn a_line_format_with_a_cut_first_line_is_read_by_line() {
    let d = dir("follow-cut-first-line");
    let file = d.join("session.jsonl");
    for (format, name) in [
        ("claude-code", "claude-subagent-agent-a3f9c1e.jsonl"),
        ("codex", "codex-rollout-custom-tools.jsonl"),
        ("mcp", "mcp-proxy.jsonl"),
    ] {
        let mut bytes = b"{\"type\":\"user\",\"mess\n".to_vec();
        bytes.extend(sample(name));
        std::fs::write(&file, &bytes).unwrap();
        let one_shot = ingest(format, &file, &d.join("one-shot.jsonl"), None);
        let expected = events(&d.join("one-shot.jsonl"));
        assert!(
            !expected.is_empty(),
            "{format}: {}",
            String::from_utf8_lossy(&one_shot.stderr)
        );
        let checkpoints = d.join(format!("checkpoints-{format}"));
        let followed = ingest(format, &file, &d.join("followed.jsonl"), Some(&checkpoints));
        assert!(
            followed.status.success(),
            "{format}: {}",
            String::from_utf8_lossy(&followed.stderr)
        );
        assert_eq!(events(&d.join("followed.jsonl")), expected, "{format}");
        let said = String::from_utf8_lossy(&followed.stderr);
        assert!(
            said.contains(":1:"),
            "{format}: the cut line is reported: {said}"
        );
    }
}

/// A document that is not complete JSON is waited for — it may be half-written — but said once.
#[test]
fn a_broken_document_is_said_not_waited_on_in_silence() {
    let d = dir("follow-broken-document");
    let file = d.join("spans.json");
    std::fs::write(&file, b"{\n  \"resourceSpans\": [\n    {\"resource\": \n").unwrap();
    let out = d.join("followed.jsonl");
    let followed = ingest("otel", &file, &out, Some(&d.join("checkpoints")));
    assert!(followed.status.success());
    assert!(events(&out).is_empty());
    let said = String::from_utf8_lossy(&followed.stderr);
    let line = said
        .lines()
        .find(|l| l.contains("not one complete JSON document yet"))
        .unwrap_or_else(|| panic!("not said:\n{said}"));
    assert!(
        line.contains("spans.json") && line.contains("otel"),
        "{line}"
    );
}

/// What a follower says goes to its log, one structured line each — as JSON lines with
/// `--log-format json`, for a log collector: a bad line, a file whose format cannot be told, the
/// missing checkpoint directory.
#[test]
fn a_follower_logs_everything_it_says_in_its_log_format() {
    let d = dir("follow-log-format");
    let sessions = d.join("sessions");
    std::fs::create_dir(&sessions).unwrap();
    let mut transcript = sample("claude-subagent-agent-a3f9c1e.jsonl");
    transcript.extend_from_slice(b"{not json\n");
    std::fs::write(sessions.join("a.jsonl"), transcript).unwrap();
    std::fs::write(sessions.join("b.jsonl"), b"{\"what\": \"is this\"}\n").unwrap();
    let out = d.join("out.jsonl");
    let run = |format: &str| {
        let _ = std::fs::remove_file(&out);
        let o = toolcalls()
            .args(["ingest", "--follow", "--once", "--log-format", format])
            .arg("--out")
            .arg(&out)
            .arg(&sessions)
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(!events(&out).is_empty());
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let said = run("json");
    let lines: Vec<serde_json::Value> = said
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let warned = |what: &str| {
        lines
            .iter()
            .any(|l| l["level"] == "WARN" && l["message"].as_str().unwrap_or("").contains(what))
    };
    for what in [
        "no --checkpoint-dir",
        "a.jsonl:",
        "cannot tell the format of the file yet",
    ] {
        assert!(warned(what), "no warning with `{what}`:\n{said}");
    }
    assert!(lines
        .iter()
        .any(|l| l["file"].as_str().is_some_and(|f| f.ends_with("b.jsonl"))));
    // As text: the same, each line a log line with its level.
    let said = run("text");
    for line in said.lines() {
        assert!(
            [" INFO ", " WARN "]
                .iter()
                .any(|level| line.contains(level)),
            "not a log line: {line}"
        );
    }
}

/// A follower whose stderr is closed (the pipe to a log collector went away) goes on following:
/// what it has to say — here that it keeps no checkpoints, and of a bad line — is lost, the
/// events are not.
#[test]
fn a_follower_whose_stderr_is_closed_goes_on() {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let d = dir("follow-stderr-closed");
    let (file, out) = (d.join("hooks.jsonl"), d.join("out.jsonl"));
    let hook = |id: &str| {
        format!(
            r#"{{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{{"file_path":"/a"}},"tool_use_id":"{id}"}}"#
        )
    };
    std::fs::write(&file, format!("{}\n", hook("toolu_a"))).unwrap();
    let mut child = toolcalls()
        .args(["ingest", "--follow", "--format", "claude-code-hooks"])
        .args(["--poll-interval", "50ms", "--out"])
        .arg(&out)
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let wait_for = |what: &str, n: usize, child: &mut std::process::Child| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while events(&out).len() < n {
            assert!(
                child.try_wait().unwrap().is_none(),
                "the follower stopped, waiting for {what}"
            );
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_for("the first event", 1, &mut child);
    let first = events(&out).len();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    std::io::Write::write_all(
        &mut f,
        format!("{{not json\n{}\n", hook("toolu_b")).as_bytes(),
    )
    .unwrap();
    wait_for("the event after the bad line", first + 1, &mut child);
    assert!(events(&out).iter().any(|e| e.contains("toolu_b")));
    assert!(child.try_wait().unwrap().is_none(), "still following");
    let _ = child.kill();
    let _ = child.wait();
}

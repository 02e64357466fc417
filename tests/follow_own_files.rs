//! `ingest --follow` and the files it keeps itself: its `--out` and its checkpoints. A run that
//! finds them broken (a line cut by a kill, a checkpoint that cannot be read) or among what it
//! follows sends nothing twice.

#[path = "support/scratch.rs"]
mod scratch;

use scratch::Scratch;
use std::path::Path;
use std::process::{Command, Output};

fn toolcalls() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolcalls"));
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("TOOLCALLS_") {
            c.env_remove(k);
        }
    }
    c
}

fn sample() -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("crates/adapters/tests/data/claude-subagent-agent-a3f9c1e.jsonl"),
    )
    .unwrap()
}

/// `ingest --follow --once` of `path` into `out` (appended to), its checkpoints in `checkpoints`.
fn follow_once(path: &Path, checkpoints: &Path, out: &Path) -> Output {
    let output = toolcalls()
        .args(["ingest", "--follow", "--once", "--checkpoint-dir"])
        .arg(checkpoints)
        .arg("--out")
        .arg(out)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn lines(out: &Path) -> Vec<String> {
    std::fs::read_to_string(out)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A follower killed while writing an event leaves part of a line at the end of `--out`; the
/// next run cuts it away (says so) and sends that event whole, so that every line is one event.
#[test]
fn a_line_cut_by_a_kill_is_taken_away_and_its_event_sent_whole() {
    let d = Scratch::new("follow-torn-out");
    let (file, cps, out) = (d.join("s.jsonl"), d.join("cp"), d.join("out.jsonl"));
    std::fs::write(&file, sample()).unwrap();
    follow_once(&file, &cps, &out);
    let all = lines(&out);
    assert!(all.len() > 2, "{} events", all.len());

    // As a kill leaves it: the last event written in part, and not checkpointed.
    let whole: usize = all[..all.len() - 1].iter().map(|l| l.len() + 1).sum();
    let text = std::fs::read(&out).unwrap();
    std::fs::write(&out, &text[..whole + all.last().unwrap().len() / 2]).unwrap();
    let Some(digests) = std::fs::read_dir(&cps)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "digests"))
    else {
        panic!("no digest log in {}", cps.display());
    };
    let log = std::fs::read(&digests).unwrap();
    std::fs::write(&digests, &log[..log.len() - 8]).unwrap();
    std::fs::remove_file(digests.with_extension("json")).unwrap();

    let again = follow_once(&file, &cps, &out);
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(said.contains("ended in part of a line"), "{said}");
    let now = lines(&out);
    assert_eq!(now.len(), all.len(), "every event once:\n{said}");
    assert_eq!(now, all, "each on a line of its own");
}

/// A checkpoint that cannot be read (a disk error, an edit by hand) does not send its file again:
/// the digest log beside it still says what was delivered.
#[test]
fn a_checkpoint_that_cannot_be_read_sends_nothing_its_digest_log_names() {
    let d = Scratch::new("follow-corrupt-checkpoint");
    let (file, cps, out) = (d.join("s.jsonl"), d.join("cp"), d.join("out.jsonl"));
    std::fs::write(&file, sample()).unwrap();
    follow_once(&file, &cps, &out);
    let all = lines(&out);
    for entry in std::fs::read_dir(&cps).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "json") {
            std::fs::write(&path, b"{\"version\":2,\"pa").unwrap();
        }
    }
    let again = follow_once(&file, &cps, &out);
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(said.contains("cannot read checkpoint"), "{said}");
    assert_eq!(lines(&out).len(), all.len(), "nothing sent again:\n{said}");
}

/// `--out` and `--checkpoint-dir` inside the followed directory are the follower's own files, not
/// transcripts: they are not followed, and a second run sends nothing.
#[test]
fn the_followers_own_files_in_the_followed_directory_are_not_followed() {
    let d = Scratch::new("follow-own-files");
    let sessions = d.join("sessions");
    std::fs::create_dir(&sessions).unwrap();
    std::fs::write(sessions.join("s.jsonl"), sample()).unwrap();
    let (cps, out) = (sessions.join("cp"), sessions.join("events.jsonl"));
    follow_once(&sessions, &cps, &out);
    let first = lines(&out);
    assert!(!first.is_empty());
    let again = follow_once(&sessions, &cps, &out);
    let said = String::from_utf8_lossy(&again.stderr);
    assert_eq!(
        lines(&out).len(),
        first.len(),
        "nothing sent again:\n{said}"
    );
    for own in ["events.jsonl", "cp/"] {
        assert!(!said.contains(own), "said of its own file {own}:\n{said}");
    }
}

/// `--out` naming an agent's transcript (here one inside the followed directory) is refused: the
/// events would be written into the transcript.
#[test]
fn an_out_that_is_a_transcript_is_refused() {
    let d = Scratch::new("follow-out-transcript");
    let sessions = d.join("sessions");
    std::fs::create_dir(&sessions).unwrap();
    let transcript = sessions.join("s.jsonl");
    std::fs::write(&transcript, sample()).unwrap();
    let out = toolcalls()
        .args(["ingest", "--follow", "--once", "--out"])
        .arg(&transcript)
        .arg(&sessions)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("holds a claude-code transcript"), "{said}");
    assert_eq!(
        std::fs::read(&transcript).unwrap(),
        sample(),
        "left as it was"
    );
}

/// A path that now holds another file of another format (saved by rename, a symlink moved) is
/// read in the format its start tells, and said to be another file: its checkpoint's format is
/// not blamed on an earlier `--format`.
#[test]
fn another_file_of_another_format_at_a_path_is_said_to_be_another_file() {
    let d = Scratch::new("follow-other-file");
    let (dir, checkpoints, out) = (d.join("in"), d.join("cp"), d.join("out.jsonl"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a.jsonl");
    std::fs::write(&file, sample()).unwrap();
    follow_once(&dir, &checkpoints, &out);
    let before = lines(&out).len();
    assert!(before > 0);

    let codex = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("crates/adapters/tests/data/codex-rollout-custom-tools.jsonl"),
    )
    .unwrap();
    let replacement = d.join("new.jsonl");
    std::fs::write(&replacement, codex).unwrap();
    std::fs::rename(&replacement, &file).unwrap();
    let said = follow_once(&dir, &checkpoints, &out);
    let said = String::from_utf8_lossy(&said.stderr);
    assert!(said.contains("another file at this path"), "{said}");
    assert!(!said.contains("an earlier --format"), "{said}");
    assert!(lines(&out).len() > before, "its events are sent: {said}");
}

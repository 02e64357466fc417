//! `ingest --follow` without a broker (`--out`): `--once` delivers what is new since the
//! checkpoints and exits; `--metrics-addr` serves the follower's metrics while it follows.

#[path = "support/scratch.rs"]
mod scratch;

#[path = "support/scrape.rs"]
mod scrape;

use scrape::{metrics_addr, scrape, value};
use scratch::Scratch;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn fixture(path: &str) -> Option<Vec<u8>> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures")
        .join(path);
    match std::fs::read(&p) {
        Ok(b) => Some(b),
        Err(_) => {
            eprintln!(
                "skipped: the shared fixtures are not beside the project ({} missing)",
                p.display()
            );
            None
        }
    }
}

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

/// `ingest --follow --once` into `out`; the number of events it wrote.
fn once(file: &Path, checkpoints: &Path, out: &Path) -> usize {
    let _ = std::fs::remove_file(out);
    let status = toolcalls()
        .args([
            "ingest",
            "--follow",
            "--once",
            "--format",
            "claude-code",
            "--checkpoint-dir",
        ])
        .arg(checkpoints)
        .arg("--out")
        .arg(out)
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::read_to_string(out).map_or(0, |t| t.lines().count())
}

#[test]
fn once_delivers_only_what_is_new_since_the_checkpoints() {
    let Some(bytes) = fixture("claude-code/agentcmd-full-session-four.jsonl") else {
        return;
    };
    let all = toolcalls()
        .args(["ingest", "--format", "claude-code", "--out", "-"])
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../shared/fixtures/claude-code/agentcmd-full-session-four.jsonl"),
        )
        .output()
        .unwrap();
    let expected = String::from_utf8_lossy(&all.stdout).lines().count();
    let d = dir("follow-once");
    let (file, cps, out) = (d.join("s.jsonl"), d.join("cp"), d.join("out.jsonl"));
    let half = bytes.len() / 2;
    let cut = half + bytes[half..].iter().position(|&b| b == b'\n').unwrap() + 1;
    std::fs::write(&file, &bytes[..cut]).unwrap();
    let first = once(&file, &cps, &out);
    assert!(first > 0 && first < expected, "{first} of {expected}");
    assert_eq!(once(&file, &cps, &out), 0, "nothing new: nothing sent");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap()
        .write_all(&bytes[cut..])
        .unwrap();
    let second = once(&file, &cps, &out);
    assert!(second > 0);
    // Events re-shaped by later lines (a result attached to its call) may be sent again; none is lost.
    assert!(
        first + second >= expected,
        "{first} + {second} < {expected}"
    );
}

#[test]
fn the_follower_serves_its_metrics() {
    let Some(bytes) = fixture("claude-code/agentcmd-full-session-four.jsonl") else {
        return;
    };
    let d = dir("follow-metrics");
    let file = d.join("s.jsonl");
    // A line that cannot be read: said and counted. A partial last line: held back, and counted
    // as behind.
    let partial = b"{\"type\":\"user\"";
    let mut content = bytes.clone();
    content.extend_from_slice(b"{\"type\":\"assistant\",\"message\":\n");
    content.extend_from_slice(partial);
    std::fs::write(&file, &content).unwrap();
    let mut child = toolcalls()
        .args([
            "ingest",
            "--follow",
            "--format",
            "claude-code",
            "--metrics-addr",
            "127.0.0.1:0",
            "--poll-interval",
            "50ms",
            "--redact-pattern",
            "NavUser",
            "--out",
        ])
        .arg(d.join("out.jsonl"))
        .arg(&file)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let addr = metrics_addr(&mut child);
    let deadline = Instant::now() + Duration::from_secs(60);
    let behind = format!(
        "toolcalls_producer_file_bytes_behind{{file=\"{}\"}}",
        file.display()
    );
    // Until the first poll is over: the events counted as sent (during the file's step) and
    // the bytes behind noted (after it).
    let mut text = String::new();
    while Instant::now() < deadline {
        text = scrape(&addr);
        let sent = value(
            &text,
            "toolcalls_producer_events_sent_total{format=\"claude-code\"}",
        );
        if sent.unwrap_or(0.0) > 0.0 && value(&text, &behind).is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let health = Command::new("curl")
        .args(["-sS", "-f", "--max-time", "5"])
        .arg(format!("http://{addr}/healthz"))
        .output()
        .expect("curl is installed");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        String::from_utf8_lossy(&health.stdout),
        "ok\n",
        "{}",
        String::from_utf8_lossy(&health.stderr)
    );
    let sent = value(
        &text,
        "toolcalls_producer_events_sent_total{format=\"claude-code\"}",
    )
    .unwrap();
    let out = std::fs::read_to_string(d.join("out.jsonl")).unwrap();
    assert_eq!(sent as usize, out.lines().count(), "{text}");
    assert!(!out.contains("NavUser"), "redacted before it is sent");
    let redacted = out.lines().filter(|l| l.contains("[REDACTED]")).count();
    assert!(redacted > 0);
    assert_eq!(
        value(
            &text,
            "toolcalls_producer_events_redacted_total{format=\"claude-code\"}"
        ),
        Some(redacted as f64),
        "{text}"
    );
    for reason in ["too_large", "refused_too_large"] {
        assert_eq!(
            value(
                &text,
                &format!(
                    "toolcalls_producer_events_left_out_total{{format=\"claude-code\",reason=\"{reason}\"}}"
                )
            ),
            Some(0.0),
            "nothing left out, and the series is there from the start: {text}"
        );
    }
    assert_eq!(value(&text, &behind), Some(partial.len() as f64), "{text}");
    assert_eq!(
        value(
            &text,
            "toolcalls_producer_bad_lines_total{format=\"claude-code\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert!(
        value(&text, "toolcalls_producer_send_errors_total") == Some(0.0),
        "{text}"
    );
}

#[test]
fn two_followers_cannot_share_a_checkpoint_directory() {
    let d = dir("follow-lock");
    let sessions = d.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let follow = |once: bool| {
        let mut c = toolcalls();
        c.args([
            "ingest",
            "--follow",
            "--format",
            "claude-code",
            "--checkpoint-dir",
        ])
        .arg(d.join("cp"))
        .arg("--out")
        .arg(d.join("out.jsonl"))
        .arg(&sessions)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        if once {
            c.arg("--once");
        }
        c
    };
    let mut first = follow(false).spawn().unwrap();
    // Following: it holds the lock from before it says so.
    let mut log = BufReader::new(first.stderr.take().unwrap());
    let mut line = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !line.contains("following") {
        line.clear();
        assert!(
            log.read_line(&mut line).unwrap() > 0,
            "the follower stopped"
        );
        assert!(Instant::now() < deadline, "the follower did not start");
    }
    let second = follow(true).output().unwrap();
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "{said}");
    assert!(said.contains("uses the checkpoint directory"), "{said}");
    let _ = first.kill();
    let _ = first.wait();
    // Once the first is gone, the directory is free again.
    let third = follow(true).output().unwrap();
    assert!(
        third.status.success(),
        "{}",
        String::from_utf8_lossy(&third.stderr)
    );
}

/// A directory the follower cannot search, and a file it cannot read, are said once, counted as
/// unreadable, and followed once they can be read — the file as soon as its permissions are put
/// right, without waiting for it to change: nothing is passed over in silence.
#[test]
fn a_directory_that_cannot_be_read_is_said_counted_and_followed_once_it_can() {
    let d = dir("follow-unreadable");
    let sample = |name: &str| {
        std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("crates/adapters/tests/data")
                .join(name),
        )
        .unwrap()
    };
    let sessions = d.join("sessions");
    let (open, locked) = (sessions.join("open"), sessions.join("locked"));
    std::fs::create_dir_all(&open).unwrap();
    std::fs::create_dir_all(&locked).unwrap();
    std::fs::write(
        open.join("a.jsonl"),
        sample("claude-subagent-agent-a3f9c1e.jsonl"),
    )
    .unwrap();
    std::fs::write(
        locked.join("b.jsonl"),
        sample("codex-rollout-custom-tools.jsonl"),
    )
    .unwrap();
    let closed = open.join("c.jsonl");
    std::fs::write(&closed, sample("claude-hooks.jsonl")).unwrap();
    let chmod = |path: &Path, m: u32| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(m)).unwrap();
    };
    let mode = |m: u32| chmod(&locked, m);
    mode(0o000);
    chmod(&closed, 0o000);
    let out = d.join("out.jsonl");
    // Root reads every directory whatever its mode: the follower then runs without the
    // capabilities that let it.
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    let mut command = if root {
        let mut c = Command::new("setpriv");
        c.args([
            "--inh-caps=-all",
            "--bounding-set=-dac_override,-dac_read_search",
        ])
        .arg(env!("CARGO_BIN_EXE_toolcalls"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_toolcalls"))
    };
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("TOOLCALLS_") {
            command.env_remove(k);
        }
    }
    let mut child = command
        .args([
            "ingest",
            "--follow",
            "--metrics-addr",
            "127.0.0.1:0",
            "--poll-interval",
            "50ms",
            "--out",
        ])
        .arg(&out)
        .arg(&sessions)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("setpriv (util-linux) runs the follower without root's capabilities");
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let collected = stderr.clone();
    let mut log = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        let mut line = String::new();
        while log.read_line(&mut line).is_ok_and(|n| n > 0) {
            collected.lock().unwrap().push_str(&line);
            line.clear();
        }
    });
    let said = || stderr.lock().unwrap().clone();
    let deadline = Instant::now() + Duration::from_secs(60);
    let wait = |what: &str, cond: &mut dyn FnMut() -> bool| {
        while !cond() {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}:\n{}",
                said()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let mut addr = String::new();
    wait("the metrics address", &mut || {
        let text = said();
        text.find("bound=").is_some_and(|i| {
            addr = text[i + 6..].split_whitespace().next().unwrap().to_owned();
            true
        })
    });
    let value = |series: &str| value(&scrape(&addr), series);
    let sent = || {
        std::fs::read_to_string(&out)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let unreadable = "toolcalls_producer_unreadable_paths";
    wait(
        "the open file's events, the locked directory and the closed file counted",
        &mut || sent() > 0 && value(unreadable) == Some(2.0),
    );
    let first = sent();
    // More polls go by (a line appended to the open file is delivered by a later one), and the
    // locked directory is not said again.
    let mut more = std::fs::OpenOptions::new()
        .append(true)
        .open(open.join("a.jsonl"))
        .unwrap();
    let line = std::fs::read_to_string(open.join("a.jsonl"))
        .unwrap()
        .lines()
        .find(|l| l.contains("\"tool_use\""))
        .unwrap()
        .replace("toolu_", "toolu_again_");
    writeln!(more, "{line}").unwrap();
    wait("the appended line", &mut || sent() > first);
    for path in [&locked, &closed] {
        let warned = said()
            .lines()
            .filter(|l| {
                l.contains(" WARN ")
                    && l.contains("cannot read a followed")
                    && l.contains(&format!("={} ", path.display()))
                    && l.contains("Permission denied")
            })
            .count();
        assert_eq!(warned, 1, "said once:\n{}", said());
    }
    assert_eq!(value(unreadable), Some(2.0));
    let before_unlock = sent();

    mode(0o755);
    wait("the locked directory's events", &mut || {
        sent() > before_unlock && value(unreadable) == Some(1.0)
    });
    // The closed file's permissions put right, its content and time unchanged.
    let before_open = sent();
    chmod(&closed, 0o644);
    wait("the closed file's events", &mut || {
        sent() > before_open && value(unreadable) == Some(0.0)
    });
    assert!(
        said().lines().any(|l| l.contains("can be read again")
            && l.contains(&format!("path={}", locked.display()))),
        "{}",
        said()
    );
    let _ = child.kill();
    let _ = child.wait();

    // What the follower wrote is what a one-shot ingest of the same files writes.
    let expected = d.join("expected.jsonl");
    let one_shot = toolcalls()
        .args(["ingest", "--out"])
        .arg(&expected)
        .arg(open.join("a.jsonl"))
        .arg(locked.join("b.jsonl"))
        .arg(&closed)
        .output()
        .unwrap();
    assert!(one_shot.status.success(), "{one_shot:?}");
    let sorted = |p: &Path| {
        let mut lines: Vec<String> = std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        lines.sort();
        lines
    };
    assert_eq!(sorted(&out), sorted(&expected));
}

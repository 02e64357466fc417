//! `toolcalls local` end to end: the bundled example, bad lines, --strict, stdin, --at-end.

#[path = "support/scratch.rs"]
mod scratch;

use scratch::Scratch;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use toolcalls_model::{Phase, Strategy, ToolCallRecord};

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/session.jsonl");

/// Two calls without results, five seconds apart.
const TWO_CALLS: &str = concat!(
    r#"{"v":1,"kind":"announce","source":"s","session":"x","callId":"a","time":"2026-01-01T00:00:00Z","tool":"T"}"#,
    "\n",
    r#"{"v":1,"kind":"announce","source":"s","session":"x","callId":"b","time":"2026-01-01T00:00:05Z","tool":"T"}"#,
);

fn toolcalls(args: &[&str], stdin: Option<&str>) -> Output {
    toolcalls_with_env(args, &[], stdin)
}

/// `toolcalls` with these environment variables (and none of the caller's `TOOLCALLS_*`).
fn toolcalls_with_env(args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolcalls"));
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("TOOLCALLS_") {
            command.env_remove(var);
        }
    }
    let mut child = command
        .envs(env.iter().copied())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run toolcalls");
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.unwrap_or_default().to_owned();
    // From another thread, so that a child writing records while it reads does not wait for
    // us. A child that refuses its arguments exits before reading: a broken pipe here is its
    // answer, not a test failure.
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(stdin.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// A fresh directory of this test run, named after the test.
fn scratch_dir(test: &str) -> Scratch {
    Scratch::new(test)
}

fn records(out: &Output) -> Vec<ToolCallRecord> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a record: {e}: {l}")))
        .collect()
}

#[test]
fn the_bundled_example_gives_the_expected_ledger() {
    let out = toolcalls(&["local", EXAMPLE], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs = records(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let count = |p: Phase| recs.iter().filter(|r| r.status.phase == p).count();
    assert_eq!(recs.len(), 9, "{stderr}");
    assert_eq!(
        (
            count(Phase::Succeeded),
            count(Phase::Failed),
            count(Phase::Interrupted),
            count(Phase::Orphaned)
        ),
        (6, 1, 1, 1)
    );
    // The bad line is reported with file, line number and reason, and the rest went on.
    assert!(
        stderr.contains("session.jsonl:25:") && stderr.contains("RFC 3339"),
        "{stderr}"
    );
    assert!(
        stderr.contains("24 events, 1 bad lines, 9 records"),
        "{stderr}"
    );
    // The id-less Gemini calls were paired by checksum (identical calls oldest first) and tool.
    let gemini: Vec<_> = recs
        .iter()
        .filter(|r| r.metadata.source.as_str() == "gemini-cli")
        .collect();
    let strategies: Vec<_> = gemini.iter().map(|r| r.correlation.strategy).collect();
    assert_eq!(
        strategies
            .iter()
            .filter(|s| **s == Strategy::Checksum)
            .count(),
        2
    );
    assert_eq!(
        strategies
            .iter()
            .filter(|s| **s == Strategy::ToolFifo)
            .count(),
        1
    );
    // The retried ticket collapsed into one record with its approval and hook decision.
    let adk = recs
        .iter()
        .find(|r| r.metadata.source.as_str() == "adk")
        .unwrap();
    assert_eq!(adk.correlation.attempts, 2);
    assert_eq!(
        adk.spec.approval.as_ref().unwrap().approved_by.as_deref(),
        Some("alice@example.com")
    );
    assert_eq!(adk.status.hook_decisions.len(), 1);
    assert_eq!(adk.status.duration_ms, Some(3000));
}

#[test]
fn output_is_deterministic_and_can_go_to_a_file() {
    let dir = scratch_dir("local");
    let path = dir.join("records.jsonl");
    // What a larger earlier run left there goes.
    std::fs::write(&path, "left by an earlier run\n".repeat(100_000)).unwrap();
    let a = toolcalls(
        &["local", "-q", EXAMPLE, "--out", path.to_str().unwrap()],
        None,
    );
    assert!(a.status.success());
    assert!(
        a.stdout.is_empty() && !a.stderr.is_empty(),
        "bad line still reported with -q"
    );
    let b = toolcalls(&["local", "-q", EXAMPLE], None);
    assert_eq!(std::fs::read(&path).unwrap(), b.stdout);
}

#[test]
fn a_file_saved_with_a_byte_order_mark_reads_as_without() {
    let plain = std::fs::read_to_string(EXAMPLE).unwrap();
    let marked = format!("\u{feff}{plain}");
    for threads in ["1", "2"] {
        let args = ["local", "--threads", threads, "-"];
        let (with, without) = (
            toolcalls(&args, Some(&marked)),
            toolcalls(&args, Some(&plain)),
        );
        assert_eq!(with.status.code(), Some(0), "--threads {threads}");
        assert_eq!(with.stdout, without.stdout, "--threads {threads}: records");
        // The same bad line (25), under the same number, and the same summary.
        assert_eq!(
            String::from_utf8_lossy(&with.stderr),
            String::from_utf8_lossy(&without.stderr),
            "--threads {threads}"
        );
        assert_eq!(records(&with).len(), 9);
    }
    // A native format is told and read through the mark too.
    let hooks = concat!(
        r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"toolu_1","timestamp":"2026-01-01T00:00:00Z"}"#,
        "\n",
        r#"{"session_id":"s","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"toolu_1","tool_response":{"stdout":""},"timestamp":"2026-01-01T00:00:01Z"}"#,
        "\n",
    );
    let args = ["local", "--format", "auto", "-"];
    let with = toolcalls(&args, Some(&format!("\u{feff}{hooks}")));
    assert_eq!(
        with.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&with.stderr)
    );
    assert_eq!(with.stdout, toolcalls(&args, Some(hooks)).stdout);
    assert_eq!(records(&with).len(), 1);
    // Elsewhere the mark is a bad line, and the message says what it is.
    let later = toolcalls(&["local", "-"], Some(&format!("{plain}\u{feff}{{}}\n")));
    let stderr = String::from_utf8_lossy(&later.stderr);
    assert!(
        stderr.contains("<stdin>:26:") && stderr.contains("byte order mark"),
        "{stderr}"
    );
}

#[test]
fn an_empty_file_has_no_format_to_tell_and_no_events() {
    let dir = scratch_dir("local-empty");
    let (empty, hooks) = (dir.join("empty.jsonl"), dir.join("hooks.jsonl"));
    std::fs::write(&empty, "\n").unwrap();
    std::fs::write(
        &hooks,
        r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{},"tool_use_id":"toolu_1","timestamp":"2026-01-01T00:00:00Z"}"#,
    )
    .unwrap();
    let out = toolcalls(
        &[
            "local",
            "--format",
            "auto",
            "-q",
            empty.to_str().unwrap(),
            hooks.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        records(&out).len(),
        1,
        "the call of the second file, pending"
    );
}

#[test]
fn a_file_in_utf16_is_refused_with_its_encoding_named() {
    let dir = scratch_dir("local-utf16");
    let text = std::fs::read_to_string(EXAMPLE).unwrap();
    for (encoding, big) in [("UTF-16LE", false), ("UTF-16BE", true)] {
        let path = dir.join(format!("{encoding}.jsonl"));
        let bytes: Vec<u8> = format!("\u{feff}{text}")
            .encode_utf16()
            .flat_map(|u| {
                if big {
                    u.to_be_bytes()
                } else {
                    u.to_le_bytes()
                }
            })
            .collect();
        std::fs::write(&path, bytes).unwrap();
        for args in [
            &["--threads", "1"][..],
            &["--threads", "2"],
            &["--format", "auto"],
        ] {
            let mut argv = vec!["local"];
            argv.extend_from_slice(args);
            argv.push(path.to_str().unwrap());
            let out = toolcalls(&argv, None);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(
                stderr.contains(&format!("{encoding}.jsonl is {encoding} text"))
                    && stderr.contains("iconv"),
                "{args:?}: {stderr}"
            );
            assert!(out.stdout.is_empty(), "{args:?}");
        }
    }
}

#[test]
fn an_output_that_is_also_an_input_is_refused_and_the_input_kept() {
    let dir = scratch_dir("local-output-over-input");
    let input = dir.join("events.jsonl");
    std::fs::copy(EXAMPLE, &input).unwrap();
    let same = dir.join(".").join("events.jsonl");
    let out = toolcalls(
        &[
            "local",
            input.to_str().unwrap(),
            "-o",
            same.to_str().unwrap(),
        ],
        None,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is also an input"), "{stderr}");
    assert_eq!(
        std::fs::read(&input).unwrap(),
        std::fs::read(EXAMPLE).unwrap()
    );
    // The same file as standard input (`< events.jsonl`), with no FILE or with `-`.
    for files in [&[][..], &["-"][..]] {
        let out = Command::new(env!("CARGO_BIN_EXE_toolcalls"))
            .arg("local")
            .args(files)
            .args(["-o", input.to_str().unwrap()])
            .stdin(std::fs::File::open(&input).unwrap())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{files:?}: {stderr}");
        assert!(stderr.contains("standard input reads it"), "{stderr}");
        assert_eq!(
            std::fs::read(&input).unwrap(),
            std::fs::read(EXAMPLE).unwrap()
        );
    }
}

/// An input that is not there, or is a directory, stops the run before the records' file is
/// made: the records an earlier run wrote there are kept.
#[test]
fn a_missing_input_leaves_an_earlier_records_file_alone() {
    let dir = scratch_dir("local-missing-input");
    let kept = dir.join("records.jsonl");
    std::fs::write(&kept, "an earlier run's records\n").unwrap();
    let missing = dir.join("no-such.jsonl");
    let sub = dir.join("a-directory");
    std::fs::create_dir(&sub).unwrap();
    for (bad, said) in [(&missing, "cannot open"), (&sub, "is a directory")] {
        let out = toolcalls(
            &[
                "local",
                EXAMPLE,
                bad.to_str().unwrap(),
                "-o",
                kept.to_str().unwrap(),
            ],
            None,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(said), "{stderr}");
        assert_eq!(
            std::fs::read_to_string(&kept).unwrap(),
            "an earlier run's records\n"
        );
    }
}

/// A redaction rule given as a variable or a flag is added to the config file's rules, not put
/// in their place: the file's secrets stay redacted.
#[test]
fn redaction_rules_from_flags_add_to_the_files() {
    let dir = scratch_dir("local-redact-add");
    let config = dir.join("toolcalls.toml");
    std::fs::write(&config, "[redact]\npatterns = [\"first-secret\"]\n").unwrap();
    let events = concat!(
        r#"{"v":1,"kind":"announce","source":"s","session":"x","time":"2026-05-10T10:00:00Z","callId":"c1","tool":"Bash","args":{"a":"first-secret","b":"second-secret","c":"third-secret"}}"#,
        "\n"
    );
    let out = toolcalls_with_env(
        &[
            "local",
            "-c",
            config.to_str().unwrap(),
            "--redact-pattern",
            "third-secret",
            "--at-end",
            "interrupt",
        ],
        &[("TOOLCALLS_REDACT_PATTERN", "second-secret")],
        Some(events),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !stdout.contains("first-secret"),
        "the file's rule: {stdout}"
    );
    assert!(!stdout.contains("third-secret"), "the flag's: {stdout}");
    assert!(
        stdout.contains("second-secret"),
        "the flag takes the variable's place, as for every option: {stdout}"
    );
    let out = toolcalls_with_env(
        &[
            "local",
            "-c",
            config.to_str().unwrap(),
            "--at-end",
            "interrupt",
        ],
        &[("TOOLCALLS_REDACT_PATTERN", "second-secret")],
        Some(events),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    for gone in ["first-secret", "second-secret"] {
        assert!(!stdout.contains(gone), "{gone}: {stdout}");
    }
}

/// A bound of 0, which would refuse or evict everything, is refused naming the flag, or the file
/// and its key.
#[test]
fn bounds_of_zero_are_refused_by_name() {
    let dir = scratch_dir("local-zero-bounds");
    let config = dir.join("toolcalls.toml");
    std::fs::write(&config, "[core]\nmax_facts_bytes = 0\n").unwrap();
    let cases: [(&[&str], &str); 3] = [
        (&["--max-pending", "0"], "--max-pending"),
        (
            &["--call-timeout", "0s"],
            "--call-timeout (TOOLCALLS_CALL_TIMEOUT",
        ),
        (&["-c", config.to_str().unwrap()], "core.max_facts_bytes"),
    ];
    for (args, said) in cases {
        let out = toolcalls(&[&["local", EXAMPLE][..], args].concat(), None);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
    }
}

/// A native file read in another format than its own gives no event and says so; with
/// `--strict` that stops the run, as a bad line does.
#[test]
fn strict_stops_on_a_file_of_another_format() {
    let codex = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/adapters/tests/data/codex-rollout-custom-tools.jsonl"
    );
    let out = toolcalls(&["local", "-f", "claude-code", codex], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("give --format codex"), "{stderr}");
    // Given as v1 events (no --format), every line is bad: the start tells which format it is.
    let out = toolcalls(&["local", codex], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "its first line is no v1 event and its start reads as codex: give --format codex"
        ),
        "{stderr}"
    );
    let v1 = toolcalls(&["local", EXAMPLE], None);
    assert!(!String::from_utf8_lossy(&v1.stderr).contains("give --format"));
    let out = toolcalls(&["local", "-f", "claude-code", "--strict", codex], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("stopping because of --strict"), "{stderr}");
}

/// Two inputs whose paths differ only in bytes that are not UTF-8 would be named alike in the
/// records' provenance: refused before the records file is made.
#[test]
fn inputs_named_alike_in_the_records_are_refused() {
    use std::os::unix::ffi::OsStrExt;
    let dir = scratch_dir("local-names-alike");
    let names = [&b"dup\xff.jsonl"[..], b"dup\xfe.jsonl"];
    let paths: Vec<PathBuf> = names
        .iter()
        .map(|n| dir.join(std::ffi::OsStr::from_bytes(n)))
        .collect();
    for p in &paths {
        std::fs::copy(EXAMPLE, p).unwrap();
    }
    let records = dir.join("records.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_toolcalls"))
        .arg("local")
        .args(&paths)
        .arg("-o")
        .arg(&records)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("rename one"), "{stderr}");
    assert!(!records.exists());
}

/// More threads than local mode starts is refused at once, before any file is made.
#[test]
fn too_many_threads_are_refused() {
    let dir = scratch_dir("local-threads");
    let out_path = dir.join("records.jsonl");
    let out = toolcalls(
        &[
            "local",
            "-j",
            "100000",
            EXAMPLE,
            "-o",
            out_path.to_str().unwrap(),
        ],
        None,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("more than the 1024"), "{stderr}");
    assert!(!out_path.exists());
}

/// `-o -` is standard output, as for `ingest --out -`, not a file named `-`.
#[test]
fn out_dash_is_standard_output() {
    let dir = scratch_dir("local-out-dash");
    let out = Command::new(env!("CARGO_BIN_EXE_toolcalls"))
        .args(["local", "-q", EXAMPLE, "-o", "-"])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(records(&out).len(), 9);
    assert!(!dir.join("-").exists());
}

#[test]
fn strict_stops_at_the_first_bad_line() {
    let out = toolcalls(&["local", "--strict", "-"], Some("{\"v\":1}\n"));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("<stdin>:1:") && stderr.contains("--strict"),
        "{stderr}"
    );
}

#[test]
fn at_end_chooses_how_pending_calls_close() {
    let input = r#"{"v":1,"kind":"announce","source":"s","session":"x","callId":"a","time":"2026-01-01T00:00:00Z","tool":"T"}"#;
    let deadlines = records(&toolcalls(&["local", "-q"], Some(input)));
    assert_eq!(deadlines[0].status.phase, Phase::TimedOut);
    let interrupt = records(&toolcalls(
        &["local", "-q", "--at-end", "interrupt"],
        Some(input),
    ));
    assert_eq!(interrupt[0].status.phase, Phase::Interrupted);
    let keep = toolcalls(&["local", "--at-end", "keep"], Some(input));
    assert!(keep.stdout.is_empty());
    assert!(String::from_utf8_lossy(&keep.stderr).contains("still pending (--at-end keep): 1"));
}

#[test]
fn settings_come_from_flags_env_and_file() {
    let input = TWO_CALLS;
    // max-pending 1: the first call is evicted when the second arrives.
    let flag = records(&toolcalls(
        &["local", "-q", "--max-pending", "1"],
        Some(input),
    ));
    assert_eq!(flag[0].status.phase, Phase::Evicted);
    let dir = scratch_dir("cfg");
    let cfg = dir.join("toolcalls.toml");
    std::fs::write(
        &cfg,
        "[core]\nmax_pending = 1\n[local]\nat_end = \"interrupt\"\n",
    )
    .unwrap();
    let file = records(&toolcalls(
        &["local", "-q", "--config", cfg.to_str().unwrap()],
        Some(input),
    ));
    assert_eq!(
        (file[0].status.phase, file[1].status.phase),
        (Phase::Evicted, Phase::Interrupted)
    );
    // The environment over the file, a flag over the environment.
    let c = cfg.to_str().unwrap();
    let env = records(&toolcalls_with_env(
        &["local", "-q", "--config", c, "--max-pending", "2"],
        &[("TOOLCALLS_AT_END", "deadlines")],
        Some(input),
    ));
    assert_eq!(
        (env[0].status.phase, env[1].status.phase),
        (Phase::TimedOut, Phase::TimedOut)
    );
    let flag = records(&toolcalls_with_env(
        &["local", "-q", "--at-end", "interrupt"],
        &[("TOOLCALLS_AT_END", "deadlines"), ("TOOLCALLS_CONFIG", c)],
        Some(input),
    ));
    assert_eq!(
        (flag[0].status.phase, flag[1].status.phase),
        (Phase::Evicted, Phase::Interrupted),
        "TOOLCALLS_CONFIG names the file"
    );
    std::fs::write(&cfg, "[core]\nmax_pendin = 1\n").unwrap();
    let bad = toolcalls(&["local", "--config", cfg.to_str().unwrap()], Some(input));
    assert_eq!(bad.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        stderr.contains("max_pendin") && stderr.contains("toolcalls.toml"),
        "{stderr}"
    );
    std::fs::write(&cfg, "[core]\nturn_grace = \"soon\"\n").unwrap();
    let bad = toolcalls(&["local", "-c", c, "--turn-grace", "1s"], Some(input));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        bad.status.code() == Some(2) && stderr.contains("core.turn_grace"),
        "a wrong value in the file is refused even where a flag overrides it: {stderr}"
    );
}

#[test]
fn one_config_file_serves_local_and_ingest() {
    let dir = scratch_dir("shared-cfg");
    let cfg = dir.join("toolcalls.toml");
    std::fs::write(
        &cfg,
        concat!(
            "brokers = \"kafka:9092\"\n",
            "group = \"ledger\"\n",
            "[topics]\nannounce = \"a\"\ncompletion = \"c\"\n",
            "[kafka]\n\"linger.ms\" = 5\n",
            "[core]\nturn_grace = \"1s\"\n",
            "[local]\nat_end = \"interrupt\"\n",
            "[ingest]\ndrop_ids = true\nformat = \"claude-code-hooks\"\n",
        ),
    )
    .unwrap();
    let hooks = dir.join("hooks.jsonl");
    std::fs::write(
        &hooks,
        r#"{"session_id":"s1","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"/a"},"tool_use_id":"toolu_1"}"#,
    )
    .unwrap();
    let c = cfg.to_str().unwrap();
    let ingest = toolcalls(
        &[
            "ingest",
            "-q",
            "--config",
            c,
            "--out",
            "-",
            hooks.to_str().unwrap(),
        ],
        None,
    );
    assert!(
        ingest.status.success(),
        "{}",
        String::from_utf8_lossy(&ingest.stderr)
    );
    let events: Vec<toolcalls_model::Event> = String::from_utf8_lossy(&ingest.stdout)
        .lines()
        .map(|l| toolcalls_model::Event::decode(l.as_bytes()).unwrap())
        .collect();
    assert_eq!(events.len(), 1);
    assert!(events[0].call_id.is_none(), "[ingest] drop_ids applied");
    let local = toolcalls(
        &["local", "-q", "--config", c],
        Some(&String::from_utf8_lossy(&ingest.stdout)),
    );
    assert!(
        local.status.success(),
        "{}",
        String::from_utf8_lossy(&local.stderr)
    );
    assert_eq!(
        records(&local)[0].status.phase,
        Phase::Interrupted,
        "[local] at_end applied"
    );
}

#[test]
fn a_config_file_sets_the_call_timeout_and_keeps_pending_calls() {
    let input = TWO_CALLS;
    let dir = scratch_dir("cfg-keep");
    let cfg = dir.join("toolcalls.toml");
    std::fs::write(
        &cfg,
        "[core]\ncall_timeout = \"1s\"\n[local]\nat_end = \"keep\"\n",
    )
    .unwrap();
    let out = toolcalls(&["local", "--config", cfg.to_str().unwrap()], Some(input));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let recs = records(&out);
    assert_eq!(recs.len(), 1, "{stderr}");
    let first = serde_json::to_value(&recs[0]).unwrap();
    assert_eq!(
        (first["streamId"].as_str(), recs[0].status.phase),
        (Some("a"), Phase::TimedOut),
        "call a timed out after 1 s of stream time"
    );
    assert!(
        stderr.contains("still pending (--at-end keep): 1"),
        "{stderr}"
    );
}

#[test]
fn help_shows_every_knob_with_its_default_variable_and_key() {
    let out = toolcalls(&["local", "--help"], None);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for knob in [
        "--at-end <MODE>",
        "[config: local.at_end]",
        "[env: TOOLCALLS_AT_END=]",
        "[default: deadlines]",
        "publish nothing for them, list them in the summary",
        "--call-timeout <DURATION>",
        "[config: core.call_timeout]",
        "[default: 30m]",
        "--max-pending <N>",
        "[default: 100000]",
        "--config <FILE>",
        "[env: TOOLCALLS_CONFIG=]",
    ] {
        assert!(help.contains(knob), "{knob} missing from:\n{help}");
    }
}

/// The ledger in local mode: a seeded mixed workload (`toolcalls-workload`) gives exactly the
/// ground truth — the processor's broker test (tests/processor/ledger.rs) checks the same.
#[test]
fn a_mixed_workload_gives_the_ground_truth() {
    for seed in [3, 4] {
        let w = toolcalls_workload::generate(&toolcalls_workload::Spec {
            seed,
            ..Default::default()
        });
        let dir = scratch_dir("ledger");
        let path = dir.join(format!("workload-{seed}.jsonl"));
        std::fs::write(&path, w.lines.join("\n") + "\n").unwrap();
        let out = toolcalls(&["local", "-q", path.to_str().unwrap()], None);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        if let Err(e) = toolcalls_workload::check(&records(&out), &w.truth) {
            panic!("seed {seed}: {e}");
        }
    }
}

/// Secrets in a real transcript's arguments appear in no output once redaction rules name them;
/// the checksum stays the one of the original arguments, and the record says what was redacted.
#[test]
fn redaction_keeps_secrets_out_of_every_output() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/claude-code/spotter-tool-heavy.jsonl");
    let Ok(text) = std::fs::read_to_string(&fixture) else {
        println!(
            "skipped: {} is missing (the shared fixtures live beside the project)",
            fixture.display()
        );
        return;
    };
    let (by_pointer, by_pattern) = ("hunter2-but-longer", "tok-0123456789abcdef");
    // The first tool call's arguments get both secrets.
    let needle = "\"type\":\"tool_use\"";
    let at = text.find(needle).expect("a tool call in the fixture");
    let input = at + text[at..].find("\"input\":{").expect("its arguments") + "\"input\":{".len();
    // And a line cut short that quotes one: its message must not.
    let injected = format!(
        "{}\"api_key\":\"{by_pointer}\",\"note\":\"use {by_pattern} here\",{}{{\"type\":\"user\",\"note\":\"{by_pattern}\n",
        &text[..input],
        &text[input..]
    );
    let dir = scratch_dir("redact");
    let file = dir.join("session.jsonl");
    std::fs::write(&file, injected).unwrap();
    let file = file.to_str().unwrap();

    let plain = toolcalls(&["local", "--format", "claude-code", file], None);
    assert!(plain.status.success());
    let plain_out = String::from_utf8_lossy(&plain.stdout);
    assert!(
        plain_out.contains(by_pointer) && plain_out.contains(by_pattern),
        "without rules the secrets are in the records"
    );
    assert!(
        String::from_utf8_lossy(&plain.stderr).contains(by_pattern),
        "without rules the bad line's message quotes it"
    );

    let redacted = toolcalls(
        &[
            "local",
            "--format",
            "claude-code",
            file,
            "--redact-pointer",
            "/api_key",
            "--redact-pattern",
            "tok-[0-9a-f]{16}",
        ],
        None,
    );
    assert!(
        redacted.status.success(),
        "{}",
        String::from_utf8_lossy(&redacted.stderr)
    );
    for output in [&redacted.stdout, &redacted.stderr] {
        let output = String::from_utf8_lossy(output);
        assert!(!output.contains(by_pointer), "{output}");
        assert!(!output.contains(by_pattern), "{output}");
    }
    let (before, after) = (records(&plain), records(&redacted));
    assert_eq!(before.len(), after.len());
    let changed: Vec<_> = after.iter().filter(|r| !r.redacted.is_empty()).collect();
    assert_eq!(changed.len(), 1, "one record held the secrets");
    let r = changed[0];
    assert_eq!(r.redacted, ["spec.input/api_key", "spec.input"]);
    let original = before
        .iter()
        .find(|b| b.metadata.name == r.metadata.name)
        .expect("the same record without rules");
    assert_eq!(
        r.checksum, original.checksum,
        "the checksum is the original arguments'"
    );
    assert!(r.checksum.is_some());
}

// --threads: the input split by (source, session) over several correlators gives every session
// the records one correlator gives it, in the same order, and the same summary.

/// Each session's output lines, in output order, by (source, session).
fn by_session(out: &Output) -> std::collections::BTreeMap<(String, String), Vec<String>> {
    let mut sessions = std::collections::BTreeMap::<_, Vec<String>>::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let record: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a record: {e}: {line}"));
        let key = (
            record["metadata"]["source"].as_str().unwrap().to_owned(),
            record["metadata"]["session"].as_str().unwrap().to_owned(),
        );
        sessions.entry(key).or_default().push(line.to_owned());
    }
    sessions
}

/// Runs `toolcalls local ARGS` with `--threads` 1, 2 and 3 (input on stdin if given) and checks
/// that every run gives each session the same records in the same order, the same stderr
/// (bad lines and refusals in input order, the summary) and the same exit code. Returns the
/// one-thread run.
fn same_on_every_thread_count(what: &str, args: &[&str], stdin: Option<&str>) -> Output {
    let run = |threads: &str| {
        let mut argv = vec!["local", "--threads", threads];
        argv.extend_from_slice(args);
        toolcalls(&argv, stdin)
    };
    let one = run("1");
    let sessions = by_session(&one);
    assert!(
        !sessions.is_empty(),
        "{what}: no records\n{}",
        String::from_utf8_lossy(&one.stderr)
    );
    for threads in ["2", "3"] {
        let many = run(threads);
        assert_eq!(
            many.status.code(),
            one.status.code(),
            "{what}, --threads {threads}: exit code"
        );
        assert_eq!(
            String::from_utf8_lossy(&many.stderr),
            String::from_utf8_lossy(&one.stderr),
            "{what}, --threads {threads}: stderr"
        );
        let many_sessions = by_session(&many);
        assert_eq!(
            many_sessions.keys().collect::<Vec<_>>(),
            sessions.keys().collect::<Vec<_>>(),
            "{what}, --threads {threads}: sessions"
        );
        for (session, records) in &sessions {
            assert!(
                many_sessions[session] == *records,
                "{what}, --threads {threads}: the records of {session:?} differ"
            );
        }
    }
    one
}

/// The shared fixtures (native formats of several frameworks), `None` when they are absent.
fn fixtures() -> Option<Vec<String>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .ok()?
        .flatten()
        .filter(|d| d.path().is_dir())
        .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
        .map(|f| f.path().to_string_lossy().into_owned())
        .collect();
    files.sort();
    (!files.is_empty()).then_some(files)
}

#[test]
fn threads_give_each_fixture_session_the_records_of_one_thread() {
    let Some(files) = fixtures() else {
        println!(
            "skipped: ../shared/fixtures is missing (the shared fixtures live beside the project)"
        );
        return;
    };
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    // Native formats through their adapters, every fixture in one run.
    for extra in [&[][..], &["--drop-ids", "--at-end", "interrupt"]] {
        let mut args = vec!["--format", "auto"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&files);
        let one = same_on_every_thread_count(&format!("fixtures {extra:?}"), &args, None);
        assert!(
            by_session(&one).len() >= files.len(),
            "one session a file at least"
        );
    }
    // The fixtures as v1 events (`toolcalls ingest`), their lines interleaved into one input,
    // from a file and from stdin, with the reorder window and redaction on.
    let mut streams = Vec::new();
    for file in &files {
        for ids in [&[][..], &["--drop-ids", "--source", "no-ids"]] {
            let mut argv = vec!["ingest", "-q", "--format", "auto", "--out", "-"];
            argv.extend_from_slice(ids);
            argv.push(file);
            let out = toolcalls(&argv, None);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            streams.push(String::from_utf8(out.stdout).unwrap());
        }
    }
    let mut lines: Vec<_> = streams.iter().map(|s| s.lines()).collect();
    let mut input = String::new();
    while lines.iter().any(|l| l.clone().next().is_some()) {
        for l in &mut lines {
            if let Some(line) = l.next() {
                input.push_str(line);
                input.push('\n');
            }
        }
    }
    let dir = scratch_dir("threads-fixtures");
    let path = dir.join("interleaved.jsonl");
    std::fs::write(&path, &input).unwrap();
    let window = ["--max-disorder", "10m", "--redact-pattern", "[0-9a-f]{12,}"];
    let mut args = vec!["-q", path.to_str().unwrap()];
    same_on_every_thread_count("fixtures as v1", &args, None);
    args.extend_from_slice(&window);
    same_on_every_thread_count("fixtures as v1, window, redaction", &args, None);
    let mut args = vec!["-"];
    args.extend_from_slice(&window);
    same_on_every_thread_count("fixtures as v1 on stdin", &args, Some(&input));
}

/// A generated workload over many sessions, cut short so calls are still pending at the end,
/// with a refused event in it, sessions sometimes written with an escape, and bad lines if
/// `bad_lines`.
fn many_sessions_with_faults(bad_lines: bool) -> String {
    let w = toolcalls_workload::generate(&toolcalls_workload::Spec {
        seed: 7,
        calls: 4_000,
        sessions: 64,
        max_disorder_ms: 3_000,
        ..Default::default()
    });
    let mut lines = w.lines[..w.lines.len() * 9 / 10].to_vec();
    // Every 7th line names its session with an escape, which the split by session reads only by
    // decoding the line: its records must still be those of its session.
    for line in lines.iter_mut().step_by(7) {
        let at = line.find("\"session\":\"").expect("a session") + "\"session\":\"".len();
        let first = line[at..].chars().next().expect("a session name");
        line.replace_range(
            at..at + first.len_utf8(),
            &format!("\\u{:04x}", u32::from(first)),
        );
    }
    // A call id reused for another tool, right after its announce: refused.
    let at = 2_000
        + lines[2_000..]
            .iter()
            .position(|l| l.contains("\"kind\":\"announce\"") && l.contains("\"callId\""))
            .unwrap();
    let mut reused: serde_json::Value = serde_json::from_str(&lines[at]).unwrap();
    reused["tool"] = "SomethingElse".into();
    lines.insert(at + 1, reused.to_string());
    if bad_lines {
        for (i, bad) in [(700, "{\"v\":1}"), (3_000, "not json"), (6_000, "")] {
            lines.insert(i, bad.to_owned());
        }
    }
    lines.join("\n") + "\n"
}

#[test]
fn threads_give_each_generated_session_the_records_of_one_thread() {
    let input = many_sessions_with_faults(true);
    let dir = scratch_dir("threads-workload");
    let path = dir.join("workload.jsonl");
    std::fs::write(&path, &input).unwrap();
    let file = path.to_str().unwrap();
    for mode in ["deadlines", "interrupt", "keep"] {
        let one = same_on_every_thread_count(mode, &[file, "--at-end", mode], None);
        let stderr = String::from_utf8_lossy(&one.stderr);
        assert!(
            stderr.contains("workload.jsonl:701: ")
                && stderr.contains("refused by the correlator (conflicting_call_id)")
                && stderr.contains(", 2 bad lines, "),
            "{stderr}"
        );
    }
    same_on_every_thread_count("window", &[file, "--max-disorder", "3s"], None);
    same_on_every_thread_count("stdin", &["--max-disorder", "3s"], Some(&input));
    // --strict stops at the first bad line whatever the thread count, with what came before.
    let strict = same_on_every_thread_count("strict", &[file, "--strict"], None);
    assert_eq!(strict.status.code(), Some(2));
    // … and at the first refused event, which the thread of its session finds.
    let refused = many_sessions_with_faults(false);
    let strict = same_on_every_thread_count("strict, refused", &["--strict"], Some(&refused));
    let stderr = String::from_utf8_lossy(&strict.stderr);
    assert!(
        strict.status.code() == Some(2) && stderr.contains("conflicting_call_id"),
        "{stderr}"
    );
    // One thread count always writes the same bytes.
    let twice: Vec<_> = (0..2)
        .map(|_| toolcalls(&["local", "-q", "--threads", "2", file], None).stdout)
        .collect();
    assert!(
        twice[0] == twice[1],
        "--threads 2 wrote two different outputs"
    );
}

#[test]
fn threads_are_a_setting() {
    let dir = scratch_dir("threads-cfg");
    let cfg = dir.join("toolcalls.toml");
    std::fs::write(&cfg, "[local]\nthreads = 3\n").unwrap();
    let c = cfg.to_str().unwrap();
    for (args, env) in [
        (&["local", "-q", "--threads", "2"][..], &[][..]),
        (&["local", "-q"][..], &[("TOOLCALLS_THREADS", "2")][..]),
        (&["local", "-q", "--config", c][..], &[][..]),
    ] {
        let out = toolcalls_with_env(args, env, Some(TWO_CALLS));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(records(&out).len(), 2);
    }
    let zero = toolcalls(&["local", "--threads", "0"], Some(TWO_CALLS));
    assert_eq!(zero.status.code(), Some(2));
    let help = String::from_utf8_lossy(&toolcalls(&["local", "--help"], None).stdout).into_owned();
    for knob in [
        "--threads <N>",
        "[config: local.threads]",
        "[env: TOOLCALLS_THREADS=]",
        "every core",
    ] {
        assert!(help.contains(knob), "{knob} missing from:\n{help}");
    }
}

/// With its stderr closed (a pipe whose reader went away) local mode still writes every record
/// and exits 0: the summary and the bad line's message are lost, not the run.
#[test]
fn a_closed_stderr_loses_the_summary_not_the_run() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolcalls"))
        .args(["local", EXAMPLE])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    assert_eq!(records(&out).len(), 9);
}

/// A file read in the format `--format` named that gives no event, where its start tells
/// another format, is said: every line was skipped as none of that format's, and the run would
/// end with no record and no error. A v1 file given with `--format auto` is named as one.
#[test]
fn a_wrong_format_that_reads_no_event_is_said() {
    let hooks = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/adapters/tests/data/claude-hooks.jsonl"
    );
    let out = toolcalls(&["local", "-q", "--format", "codex", hooks], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "no events read as codex (--format); its start reads as claude-code-hooks: give --format claude-code-hooks or auto"
        ),
        "{stderr}"
    );
    let out = toolcalls(&["local", "--format", "auto", EXAMPLE], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("holds v1 events, not a native format"),
        "{stderr}"
    );
}

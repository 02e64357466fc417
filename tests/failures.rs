//! Failures a new user meets first, tried as they would: `toolcalls run`, `topics create` and
//! `ingest` with no broker at the address given. Each must say within seconds which brokers it
//! cannot reach and why, keep saying it at a modest rate, and — `run` — report not-ready while
//! staying alive; `topics` and `ingest` give up at their bound with exit code 2 and a message that
//! says what to check. Also: no colours in a log that is not a terminal, and `topics create
//! --help` lists only what `topics` needs.
//!
//! No broker is needed: a port nothing listens on refuses every connection. The broker tests of
//! the same failures (a missing topic, authentication) are in tests/processor/operate.rs.

#[path = "support/scratch.rs"]
mod scratch;

use scratch::Scratch;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// "Within a few seconds": how long a first report may take, with room for a loaded machine.
const FIRST_REPORT: Duration = Duration::from_secs(10);
/// Bound of every other wait.
const WAIT: Duration = Duration::from_secs(15);

const SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/crates/adapters/tests/data/claude-hooks.jsonl"
);

/// A loopback port nothing listens on: every connection to it is refused.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `toolcalls` as a child process, its stderr collected line by line; killed on drop.
struct Toolcalls {
    child: Child,
    lines: Receiver<String>,
    log: Arc<Mutex<Vec<String>>>,
    started: Instant,
}

impl Toolcalls {
    /// Runs `toolcalls args…` with `env` and none of the caller's `TOOLCALLS_*` variables.
    fn spawn(args: &[&str], env: &[(&str, &str)]) -> Toolcalls {
        let mut command = Command::new(env!("CARGO_BIN_EXE_toolcalls"));
        for (var, _) in std::env::vars_os() {
            let name = var.to_string_lossy();
            if name.starts_with("TOOLCALLS_") || name == "RUST_LOG" || name == "NO_COLOR" {
                command.env_remove(var);
            }
        }
        let mut child = command
            .envs(env.iter().copied())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run toolcalls");
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = channel();
        let log = Arc::new(Mutex::new(Vec::new()));
        let keep = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                keep.lock().unwrap().push(line.clone());
                let _ = tx.send(line);
            }
        });
        Toolcalls {
            child,
            lines,
            log,
            started: Instant::now(),
        }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// The first stderr line (from now on) containing `needle`, waiting at most `bound`.
    fn wait_for(&self, needle: &str, bound: Duration) -> String {
        let deadline = Instant::now() + bound;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(_) => panic!("no `{needle}` on stderr within {bound:?}:\n{}", self.log()),
            }
        }
    }

    /// Waits at most `bound` for the process to exit.
    fn exit(&mut self, bound: Duration) -> ExitStatus {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the reader thread take the last lines: it ends with the pipe.
                let drained = Instant::now() + Duration::from_secs(5);
                while Instant::now() < drained {
                    if let Err(RecvTimeoutError::Disconnected) =
                        self.lines.recv_timeout(Duration::from_millis(50))
                    {
                        break;
                    }
                }
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "still running after {bound:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn terminate(&mut self, bound: Duration) -> ExitStatus {
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .expect("kill");
        assert!(status.success());
        self.exit(bound)
    }
}

impl Drop for Toolcalls {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal HTTP GET: (status, body).
fn get(addr: &str, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// Polls `GET path` until it answers; its status and body.
fn get_when_up(addr: &str, path: &str) -> (u16, String) {
    let deadline = Instant::now() + WAIT;
    loop {
        if std::net::TcpStream::connect(addr).is_ok() {
            return get(addr, path);
        }
        assert!(Instant::now() < deadline, "nothing listens on {addr}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn run_without_a_broker_says_which_and_why_again_and_again_and_is_not_ready() {
    let broker = format!("127.0.0.1:{}", closed_port());
    let http = format!("127.0.0.1:{}", closed_port());
    let mut run = Toolcalls::spawn(
        &["run", "--brokers", &broker, "--http-addr", &http],
        &[("RUST_LOG", "info")],
    );
    let first = run.wait_for("cannot reach the Kafka brokers", WAIT);
    assert!(
        run.started.elapsed() < FIRST_REPORT,
        "first said after {:?}",
        run.started.elapsed()
    );
    assert!(
        first.contains(&format!("at {broker}:"))
            && first.contains("Connection refused")
            && first.contains("check --brokers")
            && first.contains("WARN"),
        "{first}"
    );
    // Alive, not ready, and the metric says so.
    assert_eq!(get_when_up(&http, "/healthz").0, 200);
    let (status, body) = get(&http, "/readyz");
    assert_eq!(status, 503);
    assert!(
        body.contains("waiting for the brokers and the topics"),
        "{body}"
    );
    let (_, metrics) = get(&http, "/metrics");
    assert!(metrics.contains("\ntoolcalls_ready 0"), "{metrics}");

    // Said again while it lasts, but not more than that.
    let again = run.wait_for("still cannot reach the Kafka brokers", WAIT);
    assert!(again.contains("Connection refused"), "{again}");
    let said = run
        .log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("cannot reach the Kafka brokers"))
        .count();
    let elapsed = run.started.elapsed().as_secs();
    assert!(
        said <= 2 + (elapsed / 10) as usize,
        "{said} reports in {elapsed} s:\n{}",
        run.log()
    );
    assert_eq!(get(&http, "/readyz").0, 503);

    // A clean, prompt stop while waiting; and no colours in a log that is not a terminal.
    let stopping = Instant::now();
    assert!(run.terminate(WAIT).success(), "{}", run.log());
    assert!(
        stopping.elapsed() < Duration::from_secs(5),
        "SIGTERM took {:?}",
        stopping.elapsed()
    );
    let log = run.log();
    assert!(
        !log.contains('\u{1b}'),
        "escape codes in a redirected log:\n{log}"
    );
    assert!(!log.contains("ERROR"), "{log}");
}

#[test]
fn topics_create_without_a_broker_gives_up_at_its_timeout_saying_what_to_check() {
    let broker = format!("127.0.0.1:{}", closed_port());
    let mut topics = Toolcalls::spawn(
        &[
            "topics",
            "create",
            "--brokers",
            &broker,
            "--kafka-timeout-ms",
            "4000",
        ],
        &[],
    );
    let first = topics.wait_for("toolcalls topics: cannot reach the Kafka brokers", WAIT);
    assert!(
        topics.started.elapsed() < FIRST_REPORT
            && first.contains(&format!("at {broker}:"))
            && first.contains("Connection refused"),
        "{first}"
    );
    let status = topics.exit(WAIT);
    assert_eq!(status.code(), Some(2), "{}", topics.log());
    let log = topics.log();
    let error = log
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line:\n{log}"));
    assert!(
        error.contains("--kafka-timeout-ms (4000 ms)")
            && error.contains(&format!("cannot reach the Kafka brokers at {broker}"))
            && error.contains("Connection refused")
            && error.contains("check --brokers"),
        "{error}"
    );
}

/// A file that cannot be read, or a format name that is none, is said at once: not after the
/// wait for brokers that may not be there either.
#[test]
fn ingest_says_what_it_cannot_read_before_it_asks_a_broker() {
    let broker = format!("127.0.0.1:{}", closed_port());
    let dir = Scratch::new("failures-unreadable");
    let missing = dir.join("missing.jsonl");
    let cases: [(&[&str], &str); 5] = [
        (&[SAMPLE, missing.to_str().unwrap()], "cannot read"),
        (&[dir.to_str().unwrap()], "it is a directory"),
        (&["--format", "v1", SAMPLE], "unknown format `v1`"),
        // Events that every reader would refuse (`field session must not be empty`).
        (
            &["--session", "", SAMPLE],
            "a value is required for '--session",
        ),
        (
            &["--source", "", SAMPLE],
            "a value is required for '--source",
        ),
    ];
    for (args, said) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_toolcalls"))
            .args(["ingest", "--brokers", &broker, "--delivery-timeout", "20s"])
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
        assert!(
            // An ingest that asked says at once that it cannot reach them.
            !stderr.contains("cannot reach the Kafka brokers"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn ingest_without_a_broker_gives_up_at_the_delivery_timeout_saying_what_to_check() {
    let broker = format!("127.0.0.1:{}", closed_port());
    let args = [
        "ingest",
        "-q",
        "--format",
        "claude-code-hooks",
        SAMPLE,
        "--brokers",
        &broker,
    ];
    // The flag.
    let mut ingest = Toolcalls::spawn(&[&args[..], &["--delivery-timeout", "3s"]].concat(), &[]);
    let first = ingest.wait_for("toolcalls ingest: cannot reach the Kafka brokers", WAIT);
    assert!(
        ingest.started.elapsed() < FIRST_REPORT
            && first.contains(&format!("at {broker}:"))
            && first.contains("Connection refused"),
        "{first}"
    );
    assert_eq!(ingest.exit(WAIT).code(), Some(2), "{}", ingest.log());
    let log = ingest.log();
    let error = log
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line:\n{log}"));
    assert!(
        error.contains("gave up after 3s (the delivery timeout, --delivery-timeout)")
            && error.contains("Connection refused")
            && error.contains("check --brokers"),
        "{error}"
    );
    assert!(
        ingest.started.elapsed() < Duration::from_secs(10),
        "{:?}",
        ingest.started.elapsed()
    );

    // The same setting from the environment, and from the config file's [ingest] table.
    let dir = Scratch::new("failures");
    let config = dir.join("ingest.toml");
    std::fs::write(&config, "[ingest]\ndelivery_timeout = \"2s\"\n").unwrap();
    let config = config.to_str().unwrap();
    for (extra, env, want) in [
        (
            &[][..],
            &[("TOOLCALLS_DELIVERY_TIMEOUT", "1s")][..],
            "after 1s",
        ),
        (&["--config", config][..], &[][..], "after 2s"),
    ] {
        let mut ingest = Toolcalls::spawn(&[&args[..], extra].concat(), env);
        assert_eq!(ingest.exit(WAIT).code(), Some(2), "{}", ingest.log());
        assert!(ingest.log().contains(want), "{want}:\n{}", ingest.log());
    }
}

#[test]
fn topics_create_help_lists_what_topics_needs_and_none_of_the_processors_knobs() {
    let out = Command::new(env!("CARGO_BIN_EXE_toolcalls"))
        .args(["topics", "create", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for wanted in [
        "--partitions",
        "--output-partitions",
        "--replication",
        "--brokers",
        "--group",
        "--kafka ",
        "--kafka-timeout-ms",
        "--announce-topic",
        "--completion-topic",
        "--records-topic",
        "--dlq-topic",
        "--changelog-topic",
        "--config",
    ] {
        assert!(help.contains(wanted), "{wanted} missing:\n{help}");
    }
    for unwanted in [
        "--instance-id",
        "--guarantee",
        "--commit-interval-ms",
        "--http-addr",
        "--log-format",
        "--max-inflight-bytes",
        "--call-timeout",
        "--turn-grace",
        "Correlation rules",
    ] {
        assert!(!help.contains(unwanted), "{unwanted} listed:\n{help}");
    }
}

/// librdkafka properties may hold credentials (`sasl.password`): `--help` names the variable that
/// sets them but never shows its value, for any command that takes `--kafka`.
#[test]
fn help_never_shows_the_kafka_properties_of_the_environment() {
    for command in [
        &["run", "--help"][..],
        &["ingest", "--help"],
        &["receive", "--help"],
        &["topics", "create", "--help"],
        &["audit", "--help"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_toolcalls"))
            .args(command)
            .env("TOOLCALLS_KAFKA", "sasl.username=u,sasl.password=s3cr3t-pw")
            .output()
            .unwrap();
        assert!(out.status.success(), "{command:?}");
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains("TOOLCALLS_KAFKA"), "{command:?}: {help}");
        assert!(
            !help.contains("s3cr3t-pw"),
            "{command:?} shows the password"
        );
    }
}

/// A `--kafka` property librdkafka refuses stops the start, named by its key: librdkafka's own
/// message repeats the value, which may be a password.
#[test]
fn a_refused_kafka_property_is_named_without_its_value() {
    for command in [&["run"][..], &["topics", "create"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_toolcalls"))
            .args(command)
            .args([
                "--brokers",
                "127.0.0.1:1",
                "--kafka",
                "sasl.pasword=s3cr3t-pw",
            ])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command:?}: {said}");
        assert!(
            said.contains("--kafka sasl.pasword=…"),
            "{command:?}: {said}"
        );
        assert!(!said.contains("s3cr3t-pw"), "{command:?}: {said}");
    }
}

/// A `KEY=VALUE` value is split at commas (the variable's separator), so a password holding one
/// leaves a part without a key: it is refused without being quoted, from the flag and from the
/// variable alike.
#[test]
fn a_value_split_at_a_comma_is_refused_without_quoting_it() {
    for command in [
        &["run"][..],
        &["ingest", "x.jsonl"],
        &["receive"],
        &["topics", "create"],
        &["audit"],
    ] {
        for (flag, env) in [
            (&["--kafka", "sasl.password=s3cr3t,pw-part"][..], None),
            (&[], Some("sasl.username=u,sasl.password=s3cr3t,pw-part")),
        ] {
            let mut c = Command::new(env!("CARGO_BIN_EXE_toolcalls"));
            c.args(command).args(flag).env_remove("TOOLCALLS_KAFKA");
            if let Some(value) = env {
                c.env("TOOLCALLS_KAFKA", value);
            }
            let out = c.output().unwrap();
            let said = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{command:?}: {said}");
            assert!(
                said.contains("--kafka takes KEY=VALUE"),
                "{command:?}: {said}"
            );
            assert!(!said.contains("pw-part"), "{command:?}: {said}");
        }
    }
    let out = Command::new(env!("CARGO_BIN_EXE_toolcalls"))
        .args(["run", "--otlp-header", "authorization=Bearer ab,cd-part"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("--otlp-header takes KEY=VALUE"), "{said}");
    assert!(!said.contains("cd-part"), "{said}");
}

/// `ingest --follow --out` takes what one-shot `--out` takes: a pipe or `/dev/null` (which
/// cannot be synced to disk) as well as a file; a poll interval of 0 is refused rather than
/// spun on; follow options given to a one-shot ingest are said, not silently ignored.
#[test]
fn follow_outputs_that_are_no_files_and_follow_options_without_follow() {
    let follow = |out: &str| {
        Command::new(env!("CARGO_BIN_EXE_toolcalls"))
            .args(["ingest", "-q", "--follow", "--once", "--out", out, SAMPLE])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let to_null = follow("/dev/null");
    assert!(to_null.status.success(), "{to_null:?}");
    let to_pipe = follow("/dev/stdout");
    assert!(to_pipe.status.success(), "{to_pipe:?}");
    let sample_events = std::fs::read_to_string(SAMPLE)
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"PreToolUse\"") || l.contains("\"PostToolUse"))
        .count();
    assert!(
        String::from_utf8_lossy(&to_pipe.stdout).lines().count() >= sample_events,
        "{to_pipe:?}"
    );

    let spin = Command::new(env!("CARGO_BIN_EXE_toolcalls"))
        .args([
            "ingest",
            "--follow",
            "--poll-interval",
            "0s",
            "--out",
            "-",
            SAMPLE,
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(spin.status.code(), Some(2), "{spin:?}");
    assert!(
        String::from_utf8_lossy(&spin.stderr).contains("--poll-interval must be greater than 0")
    );

    let dir = Scratch::new("follow-options");
    let once = Command::new(env!("CARGO_BIN_EXE_toolcalls"))
        .args(["ingest", "--once", "--out", "/dev/null", "--checkpoint-dir"])
        .arg(dir.join("ck"))
        .arg(SAMPLE)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&once.stderr);
    assert!(once.status.success(), "{said}");
    assert!(said.contains("apply with --follow only"), "{said}");
}

/// A follower whose brokers are out of reach says so in its log, as a warning (a log line, with
/// `-q` too), and gives up at the delivery timeout with exit code 2: its supervisor restarts it.
#[test]
fn a_follower_without_a_broker_says_so_in_its_log_and_gives_up_at_the_delivery_timeout() {
    let broker = format!("127.0.0.1:{}", closed_port());
    let dir = Scratch::new("follow-no-broker");
    let checkpoints = dir.join("checkpoints");
    let args = [
        "ingest",
        "--follow",
        "-q",
        "--format",
        "claude-code-hooks",
        "--delivery-timeout",
        "3s",
        "--log-format",
        "json",
        "--brokers",
        &broker,
        "--checkpoint-dir",
        checkpoints.to_str().unwrap(),
        SAMPLE,
    ];
    let mut follower = Toolcalls::spawn(&args, &[]);
    let first = follower.wait_for("cannot reach the Kafka brokers", WAIT);
    let line: serde_json::Value = serde_json::from_str(first.trim())
        .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {first}"));
    assert_eq!(line["level"], "WARN", "{first}");
    assert!(
        line["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!("at {broker}"))),
        "{first}"
    );
    assert_eq!(follower.exit(WAIT).code(), Some(2), "{}", follower.log());
    // Why it stopped is in its log as well, as an error a log collector sees.
    let log = follower.log();
    let stopped = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| {
            l["level"] == "ERROR"
                && l["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("stopped: "))
        })
        .unwrap_or_else(|| panic!("no error saying why it stopped in the log:\n{log}"));
    assert!(
        stopped["message"]
            .as_str()
            .unwrap()
            .contains("--delivery-timeout"),
        "{stopped}"
    );
}

//! `ingest --follow` while its brokers stop answering: what its metrics say meanwhile. A test
//! binary of its own, as it pauses its broker (SIGSTOP): no other test may share it.

#[path = "processor/harness.rs"]
#[allow(dead_code)]
mod harness;

#[path = "support/scratch.rs"]
mod scratch;

#[path = "support/scrape.rs"]
mod scrape;

use harness::*;
use scrape::{metrics_addr, scrape, value};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// While a delivery waits on brokers that do not answer, the follower looks at nothing: its
/// bytes behind are measured again at each scrape, so they grow with what the agent appends
/// (the case `ToolcallsProducerBehind` is for). And an event too large to send is counted
/// among those read, as well as left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_behind_grow_while_a_delivery_waits_on_the_brokers() {
    let s = settings("follow-waiting");
    create_topics(&s, 1).await;
    let d = scratch::Scratch::new("follow-waiting");
    let file = d.join("s.jsonl");
    let line = |n: usize| {
        format!(
            r#"{{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_use_id":"toolu_{n}","tool_input":{{"command":"ls {n}"}}}}"#
        ) + "\n"
    };
    let too_large = format!(
        r#"{{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_use_id":"toolu_big","tool_input":{{"command":"{}"}}}}"#,
        "x".repeat(4_000)
    ) + "\n";
    std::fs::write(&file, line(0) + &too_large).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolcalls"))
        .args(["ingest", "--follow", "--format", "claude-code-hooks"])
        .args(["--metrics-addr", "127.0.0.1:0", "--poll-interval", "50ms"])
        .args(["--delivery-timeout", "120s", "--brokers", &s.brokers])
        .args(["--kafka", "message.max.bytes=2000"])
        .args(["--announce-topic", &s.topics.announce])
        .args(["--completion-topic", &s.topics.completion])
        .arg(&file)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let addr = metrics_addr(&mut child);
    let _follower = KilledOnDrop(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    let behind = format!(
        "toolcalls_producer_file_bytes_behind{{file=\"{}\"}}",
        file.display()
    );
    let sent = "toolcalls_producer_events_sent_total{format=\"claude-code-hooks\"}";
    let wait = |what: &str, ok: &dyn Fn(&str) -> bool| {
        let mut text = String::new();
        while Instant::now() < deadline {
            text = scrape(&addr);
            if ok(&text) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{what}, never:\n{text}");
    };
    wait("the first line delivered", &|t| {
        value(t, sent) == Some(1.0) && value(t, &behind) == Some(0.0)
    });
    let text = scrape(&addr);
    let read = "toolcalls_producer_events_read_total{format=\"claude-code-hooks\"}";
    assert_eq!(value(&text, read), Some(2.0), "{text}");
    let left_out = "toolcalls_producer_events_left_out_total{format=\"claude-code-hooks\",reason=\"too_large\"}";
    assert_eq!(value(&text, left_out), Some(1.0), "{text}");

    broker().pause();
    let mut appended = 0;
    let mut append = |n: usize| {
        let more = line(n);
        appended += more.len();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap()
            .write_all(more.as_bytes())
            .unwrap();
        appended
    };
    // The follower reads this one and waits for the brokers to take it.
    let first = append(1);
    wait("behind by the line in flight", &|t| {
        value(t, &behind) == Some(first as f64)
    });
    let both = append(2);
    wait("behind by both lines, while waiting", &|t| {
        value(t, &behind) == Some(both as f64)
    });
    broker().resume();
    wait("all delivered", &|t| {
        value(t, sent) == Some(3.0) && value(t, &behind) == Some(0.0)
    });
}

/// A child process killed when the test ends, passed or failed.
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

